import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { GenerationJob } from '@kiln/batching';
import { probeOrt } from '@kiln/engine-onnxruntime';
import {
  type LlamaDecoderModel,
  llamaDecoderModel,
  pythonTorchUnavailable,
} from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GenerationPool, createGenerationPool } from './generation-pool.js';

const { run: ort } = await checkEngine('OnnxRuntime', probeOrt);
const noTorch = pythonTorchUnavailable();
if (noTorch) console.warn(`skipping the pool over a Llama-style decoder: ${noTorch}`);

const PROMPTS = [
  [1, 2, 3],
  [5],
  Array.from({ length: 21 }, (_, i) => (i * 37 + 11) % 256),
  [7, 7, 7, 7, 7, 7],
  [200, 100, 50, 25],
  [42, 43],
];
const NEW_TOKENS = 12;

describe.skipIf(!ort || noTorch !== null)(
  'a generation pool over a transformers.js Llama folder',
  () => {
    let root: string;
    let model: LlamaDecoderModel;
    let pool: GenerationPool;

    beforeAll(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'kiln-pool-llama-'));
      model = await llamaDecoderModel(path.join(root, 'llama'), {
        greedyPrompts: PROMPTS,
        greedyTokens: NEW_TOKENS,
      });
      await writeFile(
        path.join(model.dir, 'serving.properties'),
        [
          'engine=OnnxRuntime',
          'option.rolling_batch=auto',
          'option.max_rolling_batch_size=4',
          'option.max_rolling_batch_prefill_tokens=8',
        ].join('\n'),
      );
      pool = await createGenerationPool({
        model: { url: model.dir, engines: ['@kiln/engine-onnxruntime'] },
        settings: { cores: 2, minWorkers: 1, maxWorkers: 1 },
      });
    }, 120_000);
    afterAll(async () => {
      await pool?.shutdown();
      await rm(root, { recursive: true, force: true });
    });

    it("generates torch's greedy tokens, four sequences at a time and one alone", async () => {
      expect(pool.kind).toBe('step');
      expect(pool.limits.maxSequenceLength).toBe(128);
      const job = (promptTokens: readonly number[]): GenerationJob => ({
        promptTokens,
        maxNewTokens: NEW_TOKENS,
        ignoreEos: true,
      });
      const together = await Promise.all(PROMPTS.map((p) => pool.predict(job(p))));
      expect(together.map((o) => o.tokens)).toEqual(model.greedy);
      const alone = await pool.predict(job(PROMPTS[2]!));
      expect(alone.tokens).toEqual(model.greedy[2]);
    });
  },
);
