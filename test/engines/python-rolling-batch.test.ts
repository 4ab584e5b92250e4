import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GenerationChunk, GenerationJob } from '@kiln/batching';
import { KilnErrorCode } from '@kiln/core';
import { type GenerationPool, createGenerationPool } from '@kiln/worker-pool';
import {
  checkPythonTorch,
  greedyAlone,
  writePythonStepModel,
} from '../support/python-step-model.js';
import { tempDir } from '../support/server-harness.js';

// A torch decoder written as a Python step handler, under the rolling loop of a generation
// pool's step workers: each request's tokens must be those of the handler run alone.
let root: string;
let dir: string;
let pool: GenerationPool;

const { run } = await checkPythonTorch();

beforeAll(async () => {
  if (!run) return;
  root = tempDir('python-rolling-batch');
  dir = writePythonStepModel(path.join(root, 'gru'), {
    'option.max_rolling_batch_size': '3',
    'option.max_rolling_batch_prefill_tokens': '8',
  });
  pool = await createGenerationPool({
    model: { url: dir, engines: ['@kiln/engine-python'] },
    settings: { cores: 2, minWorkers: 1, maxWorkers: 1 },
  });
});
afterAll(async () => {
  await pool?.shutdown({ timeoutMs: 10_000 });
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

const PROMPTS = ['hello world', 'the quick brown fox jumps over the lazy dog', 'a', 'zz top'];

describe.skipIf(!run)('a generation pool over a Python step handler', () => {
  it('answers greedy jobs as the handler does alone, streaming each token', async () => {
    expect(pool.kind).toBe('step');
    expect(pool.eosTokenId).toBe(0);
    expect(pool.limits.maxSequenceLength).toBe(256);
    const prompts = await Promise.all(PROMPTS.map((p) => pool.encode(p)));
    const jobs: GenerationJob[] = prompts.map((promptTokens) => ({
      promptTokens,
      maxNewTokens: 16,
    }));
    const chunks = jobs.map(() => [] as GenerationChunk[]);
    // More jobs than slots, and prompts longer than a step's prefill: they join and leave
    // running steps, and the long one is fed in chunks.
    const outputs = await Promise.all(
      jobs.map((job, i) =>
        pool.predict(job, { onChunk: (c) => void chunks[i]!.push(c as GenerationChunk) }),
      ),
    );
    const reference = await greedyAlone(dir, prompts, 16);
    for (const [i, output] of outputs.entries()) {
      expect(output.tokens, PROMPTS[i]).toEqual(reference[i]);
      expect(chunks[i]!.map((c) => c.token)).toEqual(output.tokens);
      expect(chunks[i]!.map((c) => c.text).join('')).toBe(output.text);
    }
    expect(new Set(outputs.map((o) => o.text)).size).toBeGreaterThan(1);
  });

  it('samples from the handler’s logits: a seeded job gives the same tokens again', async () => {
    const promptTokens = await pool.encode('hello');
    const job = { promptTokens, maxNewTokens: 12, sampling: { doSample: true, seed: 5 } };
    const [first, second] = await Promise.all([pool.predict(job), pool.predict(job)]);
    expect(first.tokens).toEqual(second.tokens);
    expect(first.tokens).toHaveLength(12);
  });

  it('fails the jobs of a Python process that dies, and replaces its worker', async () => {
    const crashed = pool.predict({ promptTokens: await pool.encode('a#'), maxNewTokens: 4 });
    const error = await crashed.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: KilnErrorCode.WorkerCrashed });
    expect((error as Error).message).toMatch(/Python worker of \S+ exited \(code 3\)/);
    const promptTokens = await pool.encode('hello world');
    const [after] = await Promise.all([
      pool.predict({ promptTokens, maxNewTokens: 16 }),
      // A worker takes the pool's next job only once it is ready again.
      new Promise((resolve) => setTimeout(resolve, 10)),
    ]);
    expect(after.tokens).toEqual((await greedyAlone(dir, [promptTokens], 16))[0]);
    expect(pool.stats().totals.crashes).toBe(1);
  });

  it('takes the tokens the handler chose itself, as it chooses them alone', async () => {
    const choosing = await createGenerationPool({
      model: {
        url: writePythonStepModel(path.join(root, 'choosing'), { 'option.choose_tokens': 'true' }),
        engines: ['@kiln/engine-python'],
      },
      settings: { cores: 2, minWorkers: 1, maxWorkers: 1 },
    });
    try {
      const prompts = await Promise.all(PROMPTS.map((p) => choosing.encode(p)));
      const outputs = await Promise.all(
        prompts.map((promptTokens) => choosing.predict({ promptTokens, maxNewTokens: 16 })),
      );
      const reference = await greedyAlone(dir, prompts, 16);
      expect(outputs.map((o) => o.tokens)).toEqual(reference);
      // A request that samples still gets logits, sampled beside the handler.
      const sampled = await choosing.predict({
        promptTokens: prompts[0]!,
        maxNewTokens: 8,
        sampling: { doSample: true, seed: 1 },
      });
      expect(sampled.tokens).toHaveLength(8);
    } finally {
      await choosing.shutdown({ timeoutMs: 10_000 });
    }
  });

  it('gives a worker option.model_loading_timeout to start', async () => {
    const slow = writePythonStepModel(path.join(root, 'slow'), {
      'option.load_seconds': '5',
      'option.model_loading_timeout': '1',
    });
    const error = await createGenerationPool({
      model: { url: slow, engines: ['@kiln/engine-python'] },
      settings: { cores: 2, minWorkers: 1, maxWorkers: 1 },
    }).then(
      (p) => p.shutdown(),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/was not ready after 1000 ms/);
  });
});
