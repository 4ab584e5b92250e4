import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineRegistry, KilnError, NDList, Tensor, loadModel } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { DlrEngine } from './dlr-engine.js';
import { probeDlr } from './probe.js';
import { createDlrEngine } from './provider.js';
import {
  ModelFolders,
  affineGraph,
  expectedAffine,
  useConformanceLibrary,
} from './test-support/models.js';

// The engine over the conformance libdlr: one DLR model per execution context, runs off the
// event loop and in parallel across contexts, threads and device options, model folders.

const libraryPath = await useConformanceLibrary();
const availability = await checkEngine('DLR', probeDlr);

const x = (rows: number, seed = 1) =>
  Float32Array.from({ length: rows * 4 }, (_, i) => ((i * 7 + seed * 3) % 11) - 5);
const input = (data: Float32Array) =>
  NDList.of(new Tensor('float32', data, [data.length / 4, 4], 'x'));

describe.skipIf(!availability.run)('the DLR engine', () => {
  let engine: DlrEngine;
  const folders = new ModelFolders(mkdtempSync(join(tmpdir(), 'kiln-dlr-engine-')));

  beforeAll(async () => {
    engine = await DlrEngine.load();
  });
  afterAll(() => rmSync(folders.root, { recursive: true, force: true }));

  it('describes the library it found and the thread default in force', () => {
    expect(engine.name).toBe('DLR');
    expect(engine.version).toBe('1.10.0-kiln-conformance');
    expect(engine.describe()).toMatchObject({
      library: libraryPath,
      foundBy: 'KILN_DLR_LIBRARY',
      defaultThreadsPerPredictor: 1,
      TVM_NUM_THREADS: process.env.TVM_NUM_THREADS,
    });
  });

  it('gives every execution context its own DLR model, and deletes them all on dispose', async () => {
    const base = (await folders.stats(engine)).liveModels;
    const { graph, params } = affineGraph();
    const model = await folders.load(engine, graph, params);
    expect((await folders.stats(engine)).liveModels).toBe(base + 1);
    const contexts = await Promise.all([1, 2, 3, 4].map(() => model.newExecutionContext()));
    // The handle that validated the folder went to the first context.
    expect((await folders.stats(engine)).liveModels).toBe(base + 4);
    await contexts[0]!.close();
    expect((await folders.stats(engine)).liveModels).toBe(base + 3);
    await model.dispose();
    expect((await folders.stats(engine)).liveModels).toBe(base);
  });

  it('deletes the DLR model of a context still being made when its model is disposed', async () => {
    const base = (await folders.stats(engine)).liveModels;
    const { graph, params } = affineGraph();
    const model = await folders.load(engine, graph, params);
    await model.newExecutionContext();
    const late = model.newExecutionContext();
    await model.dispose();
    await expect(late).rejects.toMatchObject({ code: 'CLOSED' });
    expect(model.describe().openContexts).toBe(0);
    expect((await folders.stats(engine)).liveModels).toBe(base);
  });

  it('runs contexts in parallel off the event loop without ever sharing a handle', async () => {
    const before = (await folders.stats(engine)).concurrentUses;
    const { graph, params } = affineGraph({ runDelayMs: 40 });
    const model = await folders.load(engine, graph, params);
    const contexts = await Promise.all([1, 2, 3, 4].map(() => model.newExecutionContext()));
    const check = async (context: (typeof contexts)[number], rows: number, seed: number) => {
      const data = x(rows, seed);
      const y = (await context.forward(input(data))).get('y');
      expect([...y.shape]).toEqual([rows, 2]);
      expect(Array.from(y.data as Float32Array)).toEqual(expectedAffine(data));
    };

    let start = performance.now();
    for (let i = 0; i < 8; i++) await check(contexts[0]!, 1 + (i % 3), i);
    const serial = performance.now() - start;

    start = performance.now();
    await Promise.all(
      contexts.map(async (context, c) => {
        for (let i = 0; i < 2; i++) await check(context, 1 + c, c * 2 + i);
      }),
    );
    const parallel = performance.now() - start;

    // Four contexts doing a quarter of the work each: ideally a quarter of the time.
    expect(parallel / serial).toBeLessThan(0.6);
    expect((await folders.stats(engine)).concurrentUses).toBe(before);
    await model.dispose();
  });

  it('queues forwards on one context in order instead of overlapping them', async () => {
    const { graph, params } = affineGraph({ runDelayMs: 20 });
    const model = await folders.load(engine, graph, params);
    const context = await model.newExecutionContext();
    const outputs = await Promise.all(
      [1, 2, 3].map((rows) => context.forward(input(x(rows, rows)))),
    );
    outputs.forEach((out, i) =>
      expect(Array.from(out.get(0).data as Float32Array)).toEqual(expectedAffine(x(i + 1, i + 1))),
    );
    await model.dispose();
  });

  it('keeps the event loop turning while DLR runs', async () => {
    const { graph, params } = affineGraph({ runDelayMs: 200 });
    const model = await folders.load(engine, graph, params);
    const context = await model.newExecutionContext();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 5);
    await context.forward(input(x(1)));
    clearInterval(timer);
    expect(ticks).toBeGreaterThanOrEqual(5);
    await model.dispose();
  });

  it('gives each predictor 1 thread unless option.numThreads or the worker pool says otherwise', async () => {
    const defaults = await folders.stats(engine);
    expect(defaults.handleThreads).toBe(1);
    expect(defaults.envThreads).toBe(Number(process.env.TVM_NUM_THREADS));
    expect((await folders.stats(engine, {}, 2)).handleThreads).toBe(2);
    expect((await folders.stats(engine, { numThreads: '3' }, 2)).handleThreads).toBe(3);
    const twoThreadEngine = await createDlrEngine({ defaultThreads: 2 }).load();
    expect((await folders.stats(twoThreadEngine as DlrEngine)).handleThreads).toBe(2);
  });

  it('checks the device a model was compiled for, and follows option.deviceType', async () => {
    const { graph, params } = affineGraph({ deviceType: 2 });
    const error = await folders.load(engine, graph, params).catch((e: unknown) => e);
    expect(KilnError.is(error, 'INVALID_CONFIG')).toBe(true);
    expect((error as Error).message).toMatch(/compiled for cuda, but is loaded on cpu/);
    const model = await folders.load(engine, graph, params, { deviceType: 'cuda' });
    expect(model.describe()).toMatchObject({
      compiledFor: 'cuda',
      deviceType: 'cuda',
      deviceId: 0,
    });
    const y = (await (await model.newExecutionContext()).forward(input(x(2)))).get(0);
    expect(Array.from(y.data as Float32Array)).toEqual(expectedAffine(x(2)));
    await model.dispose();
  });

  it('loads a model whose compiled-for device cannot be read, saying why in describe()', async () => {
    const { graph, params } = affineGraph({ faults: { GetDLRDeviceType: 'no metadata here' } });
    const model = await folders.load(engine, graph, params);
    expect(String(model.describe().compiledFor)).toMatch(
      /^unknown \(DLR GetDLRDeviceType failed: .*no metadata here\)$/,
    );
    await model.dispose();
  });

  it('names outputs output_<i> when the model has no DLR metadata', async () => {
    const { graph, params } = affineGraph({ hasMetadata: false });
    const model = await folders.load(engine, graph, params);
    expect(model.outputs.map((o) => o.name)).toEqual(['output_0']);
    const out = await (await model.newExecutionContext()).forward(input(x(1)));
    expect(out.names).toEqual(['output_0']);
    await model.dispose();
  });

  it('binds unnamed inputs by position and refuses names the model lacks', async () => {
    const { graph, params } = affineGraph();
    const model = await folders.load(engine, graph, params);
    const context = await model.newExecutionContext();
    const data = x(3);
    const y = (await context.forward(NDList.of(new Tensor('float32', data, [3, 4])))).get(0);
    expect(Array.from(y.data as Float32Array)).toEqual(expectedAffine(data));
    await expect(
      context.forward(NDList.of(new Tensor('float32', data, [3, 4], 'z'))),
    ).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringContaining('unknown input "z"'),
    });
    await model.dispose();
  });

  it('reports a corrupt params file with the reader’s reason', async () => {
    const { graph, params } = affineGraph();
    const dir = await folders.write(graph, params);
    writeFileSync(join(dir, 'model.params'), new Uint8Array(16));
    const error = await engine.loadModel(await folders.request(dir)).catch((e: unknown) => e);
    expect(KilnError.is(error, 'MODEL_LOAD_FAILED')).toBe(true);
    expect((error as Error).message).toMatch(
      /DLR CreateDLRModel failed: .*not a TVM params file: wrong magic number/,
    );
  });

  it('loads a folder through Kiln’s model loader, recognized by its files', async () => {
    const { graph, params } = affineGraph();
    const dir = await folders.write(graph, params);
    await rm(join(dir, 'serving.properties'));
    const registry = new EngineRegistry({});
    registry.register(createDlrEngine());
    const model = await loadModel(`affine=file://${dir}`, { registry });
    expect(model.engine).toBe('DLR');
    expect(model.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: [-1, 4] }]);
    const y = (await (await model.newExecutionContext()).forward(input(x(2)))).get(0);
    expect(Array.from(y.data as Float32Array)).toEqual(expectedAffine(x(2)));
    await model.dispose();
  });

  it('rejects close() with DLR’s message when deleting fails, and still frees the handle', async () => {
    const base = (await folders.stats(engine)).liveModels;
    const { graph, params } = affineGraph({ faults: { DeleteDLRModel: 'delete went wrong' } });
    const model = await folders.load(engine, graph, params);
    const context = await model.newExecutionContext();
    const error = await context.close().catch((e: unknown) => e);
    expect(KilnError.is(error, 'ENGINE_ERROR')).toBe(true);
    expect((error as Error).message).toContain(
      'DLR DeleteDLRModel failed: DeleteDLRModel: delete went wrong',
    );
    await expect(context.forward(input(x(1)))).rejects.toMatchObject({ code: 'CLOSED' });
    await model.dispose();
    expect((await folders.stats(engine)).liveModels).toBe(base);
  });
});
