import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { CPU, EngineRegistry, KilnError, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import { decodeOnnxModel, mlpModel, resnetModel, tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OrtModel } from './ort-model.js';
import { probeOrt } from './probe.js';
import { createOnnxRuntimeEngine, provider } from './provider.js';
import { SessionRunner } from './session-runner.js';
import { loadOrtModel } from './test-support/load.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

let root: string;
let tiny: string;
let mlp: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-engine-'));
  tiny = await tinyModel(join(root, 'tiny'));
  mlp = (await mlpModel(join(root, 'mlp'), { inputSize: 256, hidden: [512, 512], outputSize: 10 }))
    .dir;
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('OnnxRuntime provider', () => {
  it('recognizes ONNX model folders and imports nothing until loaded', () => {
    expect(provider.name).toBe('OnnxRuntime');
    expect(provider.rank).toBe(10);
    expect(provider.recognizes(['serving.properties', 'model.ONNX'])).toBe(true);
    expect(provider.recognizes(['model.pt', 'model.onnx.txt'])).toBe(false);
    expect(createOnnxRuntimeEngine({ rank: 3 }).rank).toBe(3);
  });
});

describe.skipIf(!run)('OnnxRuntime engine', () => {
  it('registers and reports the runtime it loaded', async () => {
    const registry = new EngineRegistry({});
    registry.register(provider);
    const engine = await registry.forModelFiles(['model.onnx']);
    expect(engine.name).toBe('OnnxRuntime');
    expect(engine.version).toMatch(/^1\.\d+\.\d+/);
    expect(engine.devices()).toContainEqual({ type: 'cpu', id: 0 });
    expect(engine.describe()).toMatchObject({
      runtime: 'onnxruntime-node',
      executionProviders: expect.arrayContaining([{ name: 'cpu', available: true }]),
    });
  });

  it('describes a model from the session metadata, dynamic dimensions as -1', async () => {
    const model = await loadOrtModel(tiny);
    expect(model.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: [-1, 4] }]);
    expect(model.outputs).toEqual([{ name: 'y', dtype: 'float32', shape: [-1, 4] }]);
    expect(model.describe()).toMatchObject({
      engine: 'OnnxRuntime',
      file: join(tiny, 'model.onnx'),
      session: { optLevel: 'all' },
    });
    await model.dispose();
  });

  it('counts open contexts only, and closes a context still being made when disposed', async () => {
    const model = await loadOrtModel(tiny);
    const first = await model.newExecutionContext();
    const second = await model.newExecutionContext();
    expect(model.describe().openContexts).toBe(2);
    await first.close();
    await first.close();
    expect(model.describe().openContexts).toBe(1);

    const late = model.newExecutionContext();
    await model.dispose();
    await expect(late).rejects.toMatchObject({ code: 'CLOSED' });
    expect(model.describe().openContexts).toBe(0);
    const x = NDList.of(new Tensor('float32', new Float32Array(4), [1, 4], 'x'));
    await expect(second.forward(x)).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('applies optLevel: BatchNormalization stays, folds into Conv, then becomes NCHWc kernels', async () => {
    const resnet = await resnetModel(join(root, 'resnet18'), { depth: 18, classes: 10 });
    const opsAt = async (optLevel: string) => {
      const optimizedModelFilePath = join(root, `resnet18-${optLevel}.onnx`);
      const model = await loadOrtModel(resnet.dir, {
        optLevel,
        optimizedModelFilePath,
        logSeverityLevel: '3',
      });
      await model.dispose();
      const graph = decodeOnnxModel(await readFile(optimizedModelFilePath)).graph!;
      const counts: Record<string, number> = {};
      for (const n of graph.node!)
        counts[`${n.domain || 'ai.onnx'}:${n.opType}`] =
          (counts[`${n.domain || 'ai.onnx'}:${n.opType}`] ?? 0) + 1;
      return counts;
    };
    const disabled = await opsAt('disabled');
    const basic = await opsAt('BASIC_OPT');
    const all = await opsAt('all');
    expect(disabled['ai.onnx:BatchNormalization']).toBe(20);
    expect(basic['ai.onnx:BatchNormalization']).toBeUndefined();
    expect(basic['ai.onnx:Conv']).toBe(20);
    expect(Object.keys(basic).some((k) => k.startsWith('com.microsoft.nchwc:'))).toBe(false);
    expect(Object.keys(all).some((k) => k.startsWith('com.microsoft.nchwc:'))).toBe(true);
  });

  it('applies thread counts: option.intraOpNumThreads, else the context’s intraOpThreads', async () => {
    const threadsUsed = async (options: Record<string, string>, intraOpThreads?: number) => {
      const model = await loadOrtModel(mlp, { ...options, profiling: 'true' });
      const context = await model.newExecutionContext(
        intraOpThreads === undefined ? {} : { intraOpThreads },
      );
      const x = NDList.of(
        new Tensor('float32', new Float32Array(64 * 256).fill(0.5), [64, 256], 'x'),
      );
      for (let i = 0; i < 3; i++) await context.forward(x);
      const profile = await context.endProfiling();
      await model.dispose();
      return profile.threadsUsed;
    };
    expect(await threadsUsed({ intraOpNumThreads: '1' })).toBe(1);
    expect(await threadsUsed({ intraOpNumThreads: '2' })).toBe(2);
    expect(await threadsUsed({}, 1)).toBe(1);
    expect(await threadsUsed({ intraOpNumThreads: '2' }, 1)).toBe(2);
  });

  it('applies cpuArenaAllocator: no arena is held when it is off', async () => {
    const arena = async (cpuArenaAllocator: string) => {
      const model = await loadOrtModel(mlp, { cpuArenaAllocator, profiling: 'true' });
      const context = await model.newExecutionContext();
      await context.forward(
        NDList.of(new Tensor('float32', new Float32Array(8 * 256), [8, 256], 'x')),
      );
      const profile = await context.endProfiling();
      await model.dispose();
      return profile.arenaBytes;
    };
    expect(await arena('true')).toBeGreaterThan(0);
    expect(await arena('false')).toBeUndefined();
  });

  it('applies allowSpinning: idle pool threads stop burning CPU between runs', async () => {
    const idleCpuShare = async (allowSpinning: string) => {
      // Sessions run on the calling thread: only the session's own threads use the CPU.
      const model = await loadOrtModel(mlp, { intraOpNumThreads: '2', allowSpinning });
      const context = await model.newExecutionContext();
      const x = NDList.of(new Tensor('float32', new Float32Array(64 * 256), [64, 256], 'x'));
      let share = 0;
      for (let i = 0; i < 8; i++) {
        await context.forward(x);
        const cpu = process.cpuUsage();
        const start = performance.now();
        await delay(20);
        const used = process.cpuUsage(cpu);
        share += (used.user + used.system) / 1000 / (performance.now() - start) / 8;
      }
      await model.dispose();
      return share;
    };
    const spinning = await idleCpuShare('true');
    const sleeping = await idleCpuShare('false');
    expect(spinning).toBeGreaterThan(2 * sleeping + 0.05);
  });

  it('refuses GPU execution providers that are not installed, and bad options, at load time', async () => {
    const engine = await provider.load();
    if (!engine.devices().some((d) => d.type === 'gpu')) {
      await expect(loadOrtModel(tiny, { ortDevice: 'cuda' })).rejects.toMatchObject({
        code: 'ENGINE_UNAVAILABLE',
        message: expect.stringMatching(/cuda execution provider/),
      });
      await expect(loadOrtModel(tiny, { ortDevice: 'tensorrt' })).rejects.toMatchObject({
        code: 'ENGINE_UNAVAILABLE',
      });
    }
    await expect(loadOrtModel(tiny, { executionMode: 'fast' })).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
    await expect(loadOrtModel(join(root, 'nowhere'))).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
  });

  it('opens one session for a model and its first context when the threads are known at load', async () => {
    const create = vi.spyOn(SessionRunner, 'create');
    try {
      const request = {
        name: 'model',
        modelDir: tiny,
        device: CPU,
        options: {},
        properties: servingPropertiesFrom({}),
      };
      const model = await OrtModel.load({ ...request, intraOpThreads: 1 });
      await model.newExecutionContext({ intraOpThreads: 1 });
      expect(create).toHaveBeenCalledTimes(1);
      await model.dispose();
      // Without the hint the first context asks for other threads: a second session opens.
      const other = await OrtModel.load(request);
      await other.newExecutionContext({ intraOpThreads: 1 });
      expect(create).toHaveBeenCalledTimes(3);
      await other.dispose();
    } finally {
      create.mockRestore();
    }
  });

  it('leaves callers their inputs while reusing its own transfer buffers', async () => {
    const model = await loadOrtModel(tiny);
    const context = await model.newExecutionContext();
    const inputs = [
      Float32Array.of(1, -2, 3, -4),
      Float32Array.of(5, 6, 7, 8, -9, -10, -11, -12),
      Float32Array.of(0.5, 0.25, -1, 2),
    ];
    const bigger = new Float32Array(64).fill(3);
    for (const x of [...inputs, bigger, ...inputs]) {
      const rows = x.length / 4;
      const y = (await context.forward(NDList.of(new Tensor('float32', x, [rows, 4], 'x')))).get(
        'y',
      );
      expect(x.byteLength).toBeGreaterThan(0);
      const bias = [-1, 0, 1, 2];
      expect(Array.from(y.data as Float32Array)).toEqual(
        Array.from(x, (v, i) => Math.max(0, v + bias[i % 4]!)),
      );
    }
    expect(Array.from(inputs[0]!)).toEqual([1, -2, 3, -4]);
    await model.dispose();
  });

  it('checks inputs before ONNX Runtime sees them', async () => {
    const model = await loadOrtModel(tiny);
    const context = await model.newExecutionContext();
    const attempts: [NDList, string][] = [
      [NDList.of(new Tensor('float64', new Float64Array(4), [1, 4], 'x')), 'INVALID_INPUT'],
      [NDList.of(new Tensor('string', ['a', 'b', 'c', 'd'], [1, 4], 'x')), 'INVALID_INPUT'],
      [NDList.of(new Tensor('float32', new Float32Array(4), [4], 'x')), 'SHAPE_MISMATCH'],
      [NDList.of(new Tensor('float32', new Float32Array(8), [1, 8], 'x')), 'SHAPE_MISMATCH'],
      [new NDList([]), 'INVALID_INPUT'],
    ];
    for (const [input, code] of attempts) {
      const error = await context.forward(input).catch((e: unknown) => e);
      expect(error, code).toBeInstanceOf(KilnError);
      expect((error as KilnError).code).toBe(code);
    }
    const controller = new AbortController();
    controller.abort();
    const ok = NDList.of(new Tensor('float32', Float32Array.of(1, 1, 1, 1), [1, 4], 'x'));
    await expect(context.forward(ok, { signal: controller.signal })).rejects.toMatchObject({
      code: 'CANCELLED',
    });
    expect(Array.from((await context.forward(ok)).get('y').data as Float32Array)).toEqual([
      0, 1, 2, 3,
    ]);
    await model.dispose();
    await expect(model.newExecutionContext()).rejects.toMatchObject({ code: 'CLOSED' });
  });
});
