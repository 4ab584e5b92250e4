import { resolve } from 'node:path';
import { CPU, type KilnError } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SESSION_CONFIG, parseSessionConfig, toSessionOptions } from './options.js';

const GPU1 = { type: 'gpu', id: 1 } as const;

describe('parseSessionConfig', () => {
  it('reads every DJL OnnxRuntime option key', () => {
    const config = parseSessionConfig(
      {
        intraOpNumThreads: '3',
        interOpNumThreads: '2',
        executionMode: 'PARALLEL',
        optLevel: 'BASIC_OPT',
        memoryPatternOptimization: 'false',
        cpuArenaAllocator: 'False',
        ortDevice: 'cpu',
        profiling: 'true',
      },
      CPU,
    );
    expect(config).toMatchObject({
      intraOpNumThreads: 3,
      interOpNumThreads: 2,
      executionMode: 'parallel',
      optLevel: 'basic',
      memoryPatternOptimization: false,
      cpuArenaAllocator: false,
      ortDevice: 'cpu',
      profiling: true,
    });
  });

  it('shares weights by default, keeping optimized models under KILN_HOME unless told otherwise', () => {
    expect(DEFAULT_SESSION_CONFIG).toMatchObject({
      shareWeights: true,
      optimizedModelCache: expect.stringMatching(/[\\/]onnxruntime$/),
    });
    expect(parseSessionConfig({ shareWeights: 'false' }, CPU).shareWeights).toBe(false);
    expect(parseSessionConfig({ shareWeights: 'all' }, CPU).shareWeights).toBe('all');
    expect(parseSessionConfig({ optimizedModelCache: 'none' }, CPU).optimizedModelCache).toBe(
      undefined,
    );
    expect(parseSessionConfig({ optimizedModelCache: 'False' }, CPU).optimizedModelCache).toBe(
      undefined,
    );
    expect(parseSessionConfig({ optimizedModelCache: 'rel/cache' }, CPU).optimizedModelCache).toBe(
      resolve('rel/cache'),
    );
    expect(() => parseSessionConfig({ shareWeights: 'sometimes' }, CPU)).toThrow(/shareWeights/);
  });

  it('defaults to all optimizations, sequential execution and ORT-chosen threads', () => {
    expect(parseSessionConfig({}, CPU)).toEqual(DEFAULT_SESSION_CONFIG);
    expect(parseSessionConfig({}, CPU).optLevel).toBe('all');
    expect(parseSessionConfig({ optLevel: 'NO_OPT' }, CPU).optLevel).toBe('disabled');
    expect(parseSessionConfig({ optLevel: 'extended' }, CPU).optLevel).toBe('extended');
  });

  it('lets engine defaults sit under model options', () => {
    const config = parseSessionConfig({ optLevel: 'basic' }, CPU, {
      optLevel: 'disabled',
      intraOpNumThreads: 1,
    });
    expect(config.optLevel).toBe('basic');
    expect(config.intraOpNumThreads).toBe(1);
  });

  it('takes the execution provider from the device unless ortDevice names one', () => {
    expect(parseSessionConfig({}, GPU1)).toMatchObject({ ortDevice: 'cuda', deviceId: 1 });
    expect(parseSessionConfig({ ortDevice: 'TensorRT' }, GPU1)).toMatchObject({
      ortDevice: 'tensorrt',
      deviceId: 1,
    });
  });

  it('refuses values it cannot apply with INVALID_CONFIG', () => {
    const bad: Record<string, string>[] = [
      { intraOpNumThreads: '0' },
      { intraOpNumThreads: '1.5' },
      { interOpNumThreads: 'many' },
      { executionMode: 'async' },
      { optLevel: 'max' },
      { memoryPatternOptimization: 'maybe' },
      { ortDevice: 'rocm' },
      { logSeverityLevel: '7' },
      { allowSpinning: 'sometimes' },
    ];
    for (const options of bad) {
      expect(() => parseSessionConfig(options, CPU), JSON.stringify(options)).toThrow(
        expect.objectContaining({ code: 'INVALID_CONFIG' }) as KilnError,
      );
    }
    expect(() => parseSessionConfig({ ortDevice: 'cpu' }, GPU1)).toThrow(/contradicts/);
  });
});

describe('toSessionOptions', () => {
  it('maps the config onto onnxruntime-node session options', () => {
    const config = parseSessionConfig(
      {
        intraOpNumThreads: '2',
        optLevel: 'basic',
        memoryPatternOptimization: 'false',
        cpuArenaAllocator: 'false',
        profiling: 'true',
      },
      CPU,
    );
    expect(toSessionOptions(config, '/tmp/profile/ort')).toEqual({
      executionProviders: [{ name: 'cpu', useArena: false }],
      intraOpNumThreads: 2,
      executionMode: 'sequential',
      graphOptimizationLevel: 'basic',
      enableMemPattern: false,
      enableCpuMemArena: false,
      enableProfiling: true,
      profileFilePrefix: '/tmp/profile/ort',
      extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
    });
  });

  it('turns thread-pool spinning off by default, as ONNX Runtime config entries', () => {
    expect(toSessionOptions(parseSessionConfig({}, CPU)).extra).toEqual({
      session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } },
    });
    expect(toSessionOptions(parseSessionConfig({ allowSpinning: 'true' }, CPU)).extra).toEqual({
      session: { intra_op: { allow_spinning: '1' }, inter_op: { allow_spinning: '1' } },
    });
  });

  it('leaves unset thread counts to ONNX Runtime and profiling off without a prefix', () => {
    const options = toSessionOptions(parseSessionConfig({ profiling: 'true' }, GPU1));
    expect(options).not.toHaveProperty('intraOpNumThreads');
    expect(options).not.toHaveProperty('enableProfiling');
    expect(options.executionProviders).toEqual([{ name: 'cuda', deviceId: 1 }]);
  });
});
