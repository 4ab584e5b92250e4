import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type OrtStepDecoder,
  createOnnxRuntimeEngine,
  loadOrtStepDecoder,
} from '@kiln/engine-onnxruntime';
import { type GenerationPool, createGenerationPool } from '@kiln/worker-pool';
import { gptDecoderModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestLevelBatcher } from './request-level.js';
import { makeWorkload, runWorkload } from './workload.js';

const { run } = await checkEngine('OnnxRuntime', async () => {
  await createOnnxRuntimeEngine().load();
  return null;
});

let root: string;
let decoder: OrtStepDecoder;
let pool: GenerationPool;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-bench-rolling-test-'));
  if (!run) return;
  const model = await gptDecoderModel(join(root, 'gpt'), {
    layers: 1,
    hidden: 32,
    heads: 2,
    maxLen: 512,
  });
  decoder = await loadOrtStepDecoder(model.dir, { session: { intraOpNumThreads: 1 } });
  pool = await createGenerationPool({
    model: {
      url: model.dir,
      engines: ['@kiln/engine-onnxruntime'],
      overrides: { 'option.rolling_batch': 'auto', 'option.max_rolling_batch_size': '4' },
    },
    settings: { cores: 1, minWorkers: 1, maxWorkers: 1 },
  });
});
afterAll(async () => {
  await pool?.shutdown();
  await decoder?.close();
  await rm(root, { recursive: true, force: true });
});

describe.skipIf(!run)('bench/rolling-batch', () => {
  it('serves the same workload with every contender, and they generate the same tokens', async () => {
    const workload = makeWorkload({
      requests: 10,
      vocab: decoder.vocabSize,
      promptMin: 8,
      promptMax: 32,
      outputMin: 8,
      outputMax: 48,
      meanGapMs: 2,
      seed: 3,
    });
    const runs = [
      await runWorkload(new RequestLevelBatcher(decoder, 1), workload),
      await runWorkload(new RequestLevelBatcher(decoder, 4), workload),
      await runWorkload({ generate: (job) => pool.predict(job) }, workload),
    ];
    const expected = workload.requests.reduce((n, r) => n + r.maxNewTokens, 0);
    for (const figures of runs) {
      expect(figures.tokens).toBe(expected);
      expect(figures.outputs).toEqual(runs[0]!.outputs);
      expect(figures.ttftP50Ms).toBeGreaterThan(0);
      expect(figures.interTokenP99Ms).toBeGreaterThanOrEqual(figures.interTokenP50Ms);
    }
  });
});
