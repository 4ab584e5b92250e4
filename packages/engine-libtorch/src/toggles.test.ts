import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CPU, type Engine, EngineRegistry, NDList, servingPropertiesFrom } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import type { HostTensor } from '@kiln/libtorch-native';
import { libtorch } from './native.js';
import { probeLibTorch } from './probe.js';
import { provider } from './provider.js';
import type { PtExecutionContext } from './pt-execution-context.js';
import { PtModel } from './pt-model.js';
import { convSpec, loadFolder, modelFolder, randomTensor } from './test-support/models.js';

const availability = await checkEngine('PyTorch', probeLibTorch);

/** An input large enough that LibTorch picks oneDNN for the convolution when it may. */
const image = () => randomTensor([1, 3, 100, 100], 9, 'x');

describe.skipIf(!availability.run)('PyTorch engine toggles', () => {
  let engine: Engine;
  let root: string;
  let convDir: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'kiln-pt-toggles-'));
    const registry = new EngineRegistry({});
    registry.register(provider);
    engine = await registry.get('PyTorch');
    convDir = await modelFolder(root, 'conv', convSpec());
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const contextFor = async (
    options: Record<string, string>,
  ): Promise<[PtModel, PtExecutionContext]> => {
    const model = (await loadFolder(engine, convDir, options)) as PtModel;
    return [model, await model.newExecutionContext()];
  };

  it('applies the graph-executor optimizer on the forward thread, every forward', async () => {
    const [on, onContext] = await contextFor({ graph_optimizer: 'true' });
    const [off, offContext] = await contextFor({ graph_optimizer: 'false' });
    // Interleaved, each forward sees its own model's setting on the thread that ran it.
    for (let i = 0; i < 3; i++) {
      const a = await onContext.forwardValues([image()], { captureGraph: true });
      const b = await offContext.forwardValues([image()], { captureGraph: true });
      expect(a.observed.graphOptimizer).toBe(true);
      expect(b.observed.graphOptimizer).toBe(false);
      // The optimizing executor profiles the first run (prim::profile); without it, never.
      expect(a.graph!.includes('prim::profile')).toBe(i === 0);
      expect(b.graph).not.toContain('prim::profile');
    }
    // Thread-local: nothing leaked onto the JavaScript thread.
    expect(libtorch().getGlobals().graphOptimizer).toBe(true);
    await Promise.all([on.dispose(), off.dispose()]);
  });

  it('switches oneDNN convolutions on and off', async () => {
    const [enabled, enabledContext] = await contextFor({
      use_mkldnn: 'true',
      num_threads: '2',
      optimize_for_inference: 'false',
    });
    const [disabled, disabledContext] = await contextFor({
      use_mkldnn: 'false',
      num_threads: '2',
      optimize_for_inference: 'false',
    });
    const withOneDnn = await enabledContext.forwardValues([image()], { recordOps: true });
    const without = await disabledContext.forwardValues([image()], { recordOps: true });
    expect(withOneDnn.observed.mkldnn).toBe(true);
    expect(without.observed.mkldnn).toBe(false);
    expect(withOneDnn.ops!.map((o) => o.name)).toContain('aten::mkldnn_convolution');
    expect(without.ops!.map((o) => o.name)).not.toContain('aten::mkldnn_convolution');
    const a = (withOneDnn.value as HostTensor).data as Float32Array;
    const b = (without.value as HostTensor).data as Float32Array;
    expect(a.length).toBe(b.length);
    for (let i = 0; i < a.length; i += 97) expect(a[i]).toBeCloseTo(b[i]!, 4);
    await Promise.all([enabled.dispose(), disabled.dispose()]);
  });

  it('sets intra-op threads per model and per execution context on the forward thread', async () => {
    const model = (await loadFolder(engine, convDir, { num_threads: '2' })) as PtModel;
    const modelThreads = await (await model.newExecutionContext()).forwardValues([image()]);
    const contextThreads = await (
      await model.newExecutionContext({ intraOpThreads: 1 })
    ).forwardValues([image()]);
    expect(modelThreads.observed.numThreads).toBe(2);
    expect(contextThreads.observed.numThreads).toBe(1);
    await model.dispose();
  });

  it('carries the cuDNN toggles to the forward thread (they act only on CUDA builds)', async () => {
    const [model, context] = await contextFor({ use_cudnn: 'false', cudnn_benchmark: 'true' });
    const result = await context.forwardValues([image()]);
    expect(result.observed).toMatchObject({ cudnn: false, cudnnBenchmark: true });
    const [other, otherContext] = await contextFor({ use_cudnn: 'true', cudnn_benchmark: 'false' });
    expect((await otherContext.forwardValues([image()])).observed).toMatchObject({
      cudnn: true,
      cudnnBenchmark: false,
    });
    await Promise.all([model.dispose(), other.dispose()]);
  });

  it('freezes and fuses by default (optimize_for_inference), computing the same result', async () => {
    const [plain, plainContext] = await contextFor({ optimize_for_inference: 'false' });
    const [optimized, optimizedContext] = await contextFor({});
    expect(plain.describe()).toMatchObject({
      optimizedForInference: false,
      parameters: { count: 2 },
    });
    // Frozen: the weights became constants of the graph.
    expect(optimized.describe()).toMatchObject({
      optimizedForInference: true,
      parameters: { count: 0 },
    });
    const a = (await plainContext.forward(NDList.of(image()))).get(0).data as Float32Array;
    const b = (await optimizedContext.forward(NDList.of(image()))).get(0).data as Float32Array;
    for (let i = 0; i < a.length; i += 97) expect(b[i]).toBeCloseTo(a[i]!, 4);
    await Promise.all([plain.dispose(), optimized.dispose()]);
  });

  it('loads a module it cannot optimize unoptimized by default, and fails when asked to', async () => {
    // A binding whose freezing fails, as it does for some modules.
    const real = libtorch();
    const failing = {
      ...real,
      ModuleWrap: Object.create(real.ModuleWrap, {
        load: {
          value: (file: string, options: { optimizeForInference?: boolean }) =>
            options.optimizeForInference
              ? Promise.reject(new Error('freezing is not supported for this module'))
              : real.ModuleWrap.load(file, options),
        },
      }) as typeof real.ModuleWrap,
    } as typeof real;
    const request = (options: Record<string, string>) => {
      const properties = servingPropertiesFrom(
        Object.fromEntries(Object.entries(options).map(([k, v]) => [`option.${k}`, v])),
      );
      return {
        name: 'conv',
        modelDir: convDir,
        device: CPU,
        options: properties.options,
        properties,
      };
    };
    const model = await PtModel.load(failing, request({}), {});
    expect(model.describe()).toMatchObject({
      optimizedForInference: false,
      optimizeError: expect.stringContaining('freezing is not supported'),
    });
    const context = await model.newExecutionContext();
    expect((await context.forward(NDList.of(image()))).get(0).shape).toEqual([1, 8, 98, 98]);
    await model.dispose();
    await expect(
      PtModel.load(failing, request({ optimize_for_inference: 'true' }), {}),
    ).rejects.toMatchObject({ message: expect.stringContaining('freezing is not supported') });
  });

  it('warms up configured shapes at load, so the first request runs the optimized plan', async () => {
    const [cold, coldContext] = await contextFor({});
    const [warm, warmContext] = await contextFor({ warmup: '1,3,100,100' });
    const first = async (context: PtExecutionContext) =>
      (await context.forwardValues([image()], { captureGraph: true })).graph!.includes(
        'prim::profile',
      );
    expect(await first(coldContext)).toBe(true);
    expect(await first(warmContext)).toBe(false);
    await Promise.all([cold.dispose(), warm.dispose()]);
  });

  it('refuses an inter-op pool size other than the one LibTorch already fixed', async () => {
    const current = libtorch().getGlobals().numInteropThreads;
    const same = await loadFolder(engine, convDir, { num_interop_threads: String(current) });
    await same.dispose();
    await expect(
      loadFolder(engine, convDir, { num_interop_threads: String(current + 1) }),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('once per process'),
    });
  });
});
