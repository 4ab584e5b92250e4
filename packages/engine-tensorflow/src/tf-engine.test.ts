import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Engine, KilnError, NDList, Tensor } from '@kiln/core';
import { checkEngine, tfjsAffineModel } from '@kiln/testing';
import { isPackageInstalled } from './runtime/packages.js';
import { createTensorFlowEngine, probeTensorFlow, provider } from './index.js';
import { heavyGraph } from './test-support/heavy-graph.js';
import { loadRequest, temporaryFolder } from './test-support/requests.js';
import type { TfExecutionContext } from './tf-execution-context.js';

const availability = await checkEngine('TensorFlow', () => probeTensorFlow('wasm'));
const nativeInstalled =
  isPackageInstalled('@tensorflow/tfjs-node') || isPackageInstalled('@tensorflow/tfjs-node-gpu');

describe.skipIf(!availability.run)('TensorFlow engine', () => {
  const tmp = temporaryFolder('engine');
  let engine: Engine;
  const folder = (label: string) => fs.mkdtempSync(path.join(tmp.dir, `${label}-`));

  beforeAll(async () => {
    engine = await createTensorFlowEngine({ backend: ['wasm', 'cpu'] }).load();
  });
  afterAll(tmp.remove);

  it('reports the backend it chose and why every better one was skipped', () => {
    const description = engine.describe();
    expect(description).toMatchObject({
      backend: 'wasm',
      native: false,
      gpu: false,
      simd: true,
      multithreaded: false,
    });
    expect(description.skipped).toEqual([
      { backend: 'tfjs-node-gpu', reason: expect.stringContaining('not requested') },
      { backend: 'tfjs-node', reason: expect.stringContaining('not requested') },
    ]);
    expect(description.models).toBe('in the loading thread');
    expect(engine.version).toMatch(/^4\.\d+\.\d+/);
    expect(engine.devices()).toEqual([{ type: 'cpu', id: 0 }]);
  });

  it('recognises TF.js models and SavedModels by their files', () => {
    expect(provider.recognizes(['model.json', 'group1-shard1of1.bin'])).toBe(true);
    expect(provider.recognizes(['saved_model.pb', 'variables/variables.index'])).toBe(true);
    expect(provider.recognizes(['model.onnx'])).toBe(false);
    expect(provider.rank).toBeLessThan(10);
  });

  it('asks the worker pool for one shared host thread only where native TensorFlow loads', () => {
    // tfjs-node loads in one thread per process; the JavaScript backends load in any thread,
    // so their workers get threads of their own or run inline (the pool's placement).
    expect(createTensorFlowEngine({ backend: ['wasm', 'cpu'] }).hostThread).toBe('per-worker');
    expect(provider.hostThread).toBe(nativeInstalled ? 'shared' : 'per-worker');
    expect(createTensorFlowEngine({ env: { KILN_TENSORFLOW_BACKEND: 'cpu' } }).hostThread).toBe(
      'per-worker',
    );
  });

  it('refuses a GPU it does not have, naming the package that brings one', async () => {
    const { dir } = await tfjsAffineModel(folder('gpu'));
    await expect(
      engine.loadModel(loadRequest(dir, {}, { type: 'gpu', id: 0 })),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('@tensorflow/tfjs-node-gpu'),
    });
  });

  it.skipIf(nativeInstalled)('names what to install for a SavedModel', async () => {
    const dir = folder('saved-model');
    fs.writeFileSync(path.join(dir, 'saved_model.pb'), Buffer.from([0x08, 0x01]));
    const error = await engine.loadModel(loadRequest(dir)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(KilnError);
    expect(error).toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
      message: expect.stringContaining('install @tensorflow/tfjs-node'),
    });
    expect((error as KilnError).message).toContain('tensorflowjs_converter');
  });

  it('runs a model in the loading thread, refuses a cancelled caller, and closes', async () => {
    const model = await engine.loadModel(loadRequest(await heavyGraph(folder('heavy'), 2)));
    expect(model.describe()).toMatchObject({
      format: 'graph-model',
      backend: 'wasm',
      runsIn: 'the loading thread',
    });
    const context = (await model.newExecutionContext()) as TfExecutionContext;
    const n = 64;
    const x = new Tensor('float32', new Float32Array(n * n).fill(0.5), [n, n], 'x');
    const controller = new AbortController();
    controller.abort();
    await expect(
      context.forward(NDList.of(x), { signal: controller.signal }),
    ).rejects.toMatchObject({ code: 'CANCELLED' });
    const after = await context.forward(NDList.of(x));
    expect([...after.get('y').shape]).toEqual([n, n]);

    await model.dispose();
    await expect(context.forward(NDList.of(x))).rejects.toMatchObject({ code: 'CLOSED' });
    await expect(model.newExecutionContext()).rejects.toMatchObject({ code: 'CLOSED' });
  });

  it('leaves tf.memory() of its thread flat across thousands of requests', async () => {
    const fixture = await tfjsAffineModel(folder('memory'));
    const model = await engine.loadModel(loadRequest(fixture.dir));
    const context = (await model.newExecutionContext()) as TfExecutionContext;
    const input = (i: number) =>
      NDList.of(new Tensor('float32', Float32Array.from([i, 1, 2, 3]), [1, 4], 'x'));
    await context.forward(input(0));
    const before = await context.memory();
    for (let i = 1; i <= 2000; i++) {
      const y = (await context.forward(input(i))).get('y').data as Float32Array;
      if (i % 500 === 0) expect(y[0]).toBeCloseTo(i * 0.5 + 1.5 - 4 + 0.375 + 0.1, 3);
    }
    expect(await context.memory()).toEqual(before);
    await model.dispose();
  });
});
