import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NDList, Tensor } from '@kiln/core';
import { mlpModel, transformerEncoderModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeOrt } from '../probe.js';
import { loadOrtModel } from '../test-support/load.js';
import { formatProfile } from './format-profile.js';
import { bottlenecks } from './ort-profile.js';
import { profileModel } from './profile-model.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

let root: string;
let mlp: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-profiling-test-'));
  mlp = (
    await mlpModel(join(root, 'mlp'), {
      inputSize: 512,
      hidden: [2048, 64],
      outputSize: 10,
      softmax: true,
    })
  ).dir;
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe.skipIf(!run)('per-node profiling', () => {
  it('profiles a model into per-node rows, slowest first, leaving warm-up runs out', async () => {
    const profile = await profileModel(mlp, {
      runs: 5,
      warmup: 2,
      batchSize: 32,
      options: { intraOpNumThreads: '1' },
    });
    expect(profile.runs).toBe(5);
    expect(profile.nodes.every((r) => r.calls === 5)).toBe(true);
    expect(profile.nodes.map((r) => r.totalMs)).toEqual(
      [...profile.nodes.map((r) => r.totalMs)].sort((a, b) => b - a),
    );
    expect(profile.nodes.reduce((sum, r) => sum + r.share, 0)).toBeCloseTo(1, 5);
    expect(profile.opTypes.map((r) => r.opType)).toContain('Softmax');
    // The 512×2048 layer holds 90% of the multiply-adds: it must be the bottleneck.
    const [top] = bottlenecks(profile);
    expect(top!.opType).toMatch(/MatMul|Gemm|FusedMatMul/);
    expect(top!.share).toBeGreaterThan(0.5);
    expect(profile.meanRunMs).toBeGreaterThan(0);
    expect(formatProfile(profile)).toContain(top!.name);
  });

  it('profiles a dynamic-shape model from synthetic inputs', async () => {
    const encoder = await transformerEncoderModel(join(root, 'encoder'), {
      layers: 1,
      hidden: 32,
      heads: 2,
      maxLen: 64,
      vocabSize: 100,
    });
    const profile = await profileModel(join(encoder.dir, 'model.onnx'), {
      runs: 2,
      warmup: 0,
      batchSize: 2,
      dynamicSize: 8,
    });
    expect(profile.runs).toBe(2);
    expect(profile.opTypes.map((r) => r.opType)).toEqual(
      expect.arrayContaining(['LayerNormalization', 'Softmax']),
    );
  });

  it('profiles an execution context of a model loaded with option.profiling=true, once', async () => {
    const model = await loadOrtModel(mlp, { profiling: 'true' });
    const context = await model.newExecutionContext();
    await context.forward(NDList.of(new Tensor('float32', new Float32Array(512), [1, 512], 'x')));
    const profile = await context.endProfiling();
    expect(profile.runs).toBe(1);
    expect(profile.nodes.length).toBeGreaterThan(0);
    await expect(context.endProfiling()).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
    await model.dispose();

    const plain = await loadOrtModel(mlp);
    await expect((await plain.newExecutionContext()).endProfiling()).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringMatching(/option.profiling=true/),
    });
    await plain.dispose();
  });

  it('writes traces into a temporary folder, never the working directory, and removes them', async () => {
    const before = await readdir(process.cwd());
    await profileModel(mlp, { runs: 1, warmup: 0 });
    const after = await readdir(process.cwd());
    expect(after.filter((f) => !before.includes(f))).toEqual([]);
    expect((await readdir(tmpdir())).filter((f) => f.startsWith('kiln-ort-profile-'))).toEqual([]);
  });
});
