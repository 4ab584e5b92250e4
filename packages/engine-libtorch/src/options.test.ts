import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { engineOptionsFromEnv, resolveModelSettings } from './options.js';

describe('resolveModelSettings', () => {
  it('fills in defaults', () => {
    expect(resolveModelSettings({})).toEqual({
      numThreads: availableParallelism(),
      numInteropThreads: undefined,
      graphOptimizer: true,
      useMkldnn: undefined,
      useCudnn: undefined,
      cudnnBenchmark: undefined,
      optimizeForInference: true,
      optimizeByDefault: true,
      mapLocation: true,
      extraFiles: [],
      warmup: undefined,
      warmupIterations: 2,
    });
  });

  it('prefers model options over engine options', () => {
    const settings = resolveModelSettings(
      {
        num_threads: '3',
        graph_optimizer: 'off',
        use_mkldnn: 'yes',
        extraFiles: ' a.txt ,b.json,',
        mapLocation: 'false',
      },
      { numThreads: 1, graphOptimizer: true, numInteropThreads: 2, cudnnBenchmark: true },
    );
    expect(settings).toMatchObject({
      numThreads: 3,
      graphOptimizer: false,
      useMkldnn: true,
      numInteropThreads: 2,
      cudnnBenchmark: true,
      mapLocation: false,
      extraFiles: ['a.txt', 'b.json'],
    });
  });

  it('rejects malformed values with INVALID_CONFIG', () => {
    expect(() => resolveModelSettings({ use_mkldnn: 'sometimes' })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
    expect(() => resolveModelSettings({ num_threads: '0' })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
    expect(() => resolveModelSettings({ num_threads: '2.5' })).toThrow(/integer/);
  });
});

describe('engineOptionsFromEnv', () => {
  it('reads KILN_PYTORCH_* and leaves unset ones undefined', () => {
    expect(
      engineOptionsFromEnv({ KILN_PYTORCH_NUM_THREADS: '2', KILN_PYTORCH_USE_MKLDNN: 'false' }),
    ).toEqual({
      numThreads: 2,
      numInteropThreads: undefined,
      graphOptimizer: undefined,
      useMkldnn: false,
      useCudnn: undefined,
      cudnnBenchmark: undefined,
      optimizeForInference: undefined,
    });
  });
});
