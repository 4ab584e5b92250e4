import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CPU, NDList, Tensor } from '@kiln/core';
import { loadTfjs, tfjsAffineModel, tfjsSaveHandler } from '@kiln/testing';
import { TfModelRunner } from '../execution/model-runner.js';
import { loadTfModel } from '../model/load-model.js';
import { type TfRuntime, resolveRuntime } from '../runtime/resolve-runtime.js';
import { temporaryFolder } from '../test-support/requests.js';
import { loadArtifacts } from './file-system-handler.js';

const tmp = temporaryFolder('fs-handler');
let runtime: TfRuntime;

beforeAll(async () => {
  runtime = await resolveRuntime(['wasm']);
});
afterAll(tmp.remove);

const spec = (modelDir: string) => ({
  name: path.basename(modelDir),
  modelDir,
  device: CPU,
  options: {},
});

/** A two-layer MLP saved with small shards, and its outputs for `x` computed before saving. */
async function shardedMlp(dir: string, x: Float32Array): Promise<Float32Array> {
  const tf = await loadTfjs();
  const input = tf.input({ shape: [8], name: 'x' });
  const hidden = tf.layers.dense({ units: 16, activation: 'relu', name: 'hidden' }).apply(input);
  const output = tf.layers.dense({ units: 3, name: 'y' }).apply(hidden) as ReturnType<
    typeof tf.input
  >;
  const model = tf.model({ inputs: input, outputs: output });
  const expected = tf.tidy(() =>
    (model.predict(tf.tensor2d(x, [x.length / 8, 8])) as ReturnType<typeof tf.tensor>).dataSync(),
  );
  await model.save(tfjsSaveHandler(tf, dir, { shardBytes: 128 }));
  model.dispose();
  return Float32Array.from(expected);
}

describe('file-system load handler', () => {
  it('reads model.json and every shard of its manifest, in order', async () => {
    const dir = path.join(tmp.dir, 'sharded');
    const x = Float32Array.from({ length: 16 }, (_, i) => Math.sin(i));
    const expected = await shardedMlp(dir, x);
    const shards = fs.readdirSync(dir).filter((f) => f.endsWith('.bin'));
    // (8×16 + 16 + 16×3 + 3) float32 weights = 780 bytes: seven 128-byte shards.
    expect(shards).toHaveLength(7);

    const artifacts = await loadArtifacts(runtime.tf, path.join(dir, 'model.json'));
    expect(artifacts.weightSpecs?.map((w) => w.name)).toEqual([
      'hidden/kernel',
      'hidden/bias',
      'y/kernel',
      'y/bias',
    ]);
    expect((artifacts.weightData as ArrayBuffer[]).map((b) => b.byteLength)).toEqual([
      128, 128, 128, 128, 128, 128, 12,
    ]);

    const runner = new TfModelRunner(runtime, 'mlp', await loadTfModel(runtime, spec(dir)));
    const y = (await runner.run(NDList.of(new Tensor('float32', x, [2, 8], 'x')))).get('y');
    expect([...y.shape]).toEqual([2, 3]);
    Array.from(y.data as Float32Array).forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, 5));
    runner.dispose();
  });

  it('refuses shard paths that leave the model folder', async () => {
    const { dir } = await tfjsAffineModel(fs.mkdtempSync(path.join(tmp.dir, 'escape-')));
    const file = path.join(dir, 'model.json');
    const json = JSON.parse(fs.readFileSync(file, 'utf8')) as {
      weightsManifest: { paths: string[] }[];
    };
    json.weightsManifest[0]!.paths = ['../../etc/passwd'];
    fs.writeFileSync(file, JSON.stringify(json));
    await expect(loadArtifacts(runtime.tf, file)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining('outside the model folder'),
    });
  });

  it('names a missing shard', async () => {
    const { dir } = await tfjsAffineModel(fs.mkdtempSync(path.join(tmp.dir, 'missing-')));
    fs.rmSync(path.join(dir, 'group1-shard1of1.bin'));
    await expect(loadTfModel(runtime, spec(dir))).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining('group1-shard1of1.bin'),
    });
  });

  it('refuses a shard shorter than its weights', async () => {
    const { dir } = await tfjsAffineModel(fs.mkdtempSync(path.join(tmp.dir, 'short-')));
    fs.writeFileSync(path.join(dir, 'group1-shard1of1.bin'), Buffer.alloc(12));
    await expect(loadTfModel(runtime, spec(dir))).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
    });
  });

  it('refuses model.json that is not JSON, or not a TF.js model', async () => {
    const dir = fs.mkdtempSync(path.join(tmp.dir, 'bad-json-'));
    const file = path.join(dir, 'model.json');
    fs.writeFileSync(file, '{"modelTopology": ');
    await expect(loadArtifacts(runtime.tf, file)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining('not valid JSON'),
    });
    fs.writeFileSync(file, '{"format": "graph-model"}');
    await expect(loadArtifacts(runtime.tf, file)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining('no modelTopology'),
    });
  });
});
