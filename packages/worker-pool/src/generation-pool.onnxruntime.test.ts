import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  type GenerationChunk,
  type GenerationJob,
  type GenerationOutput,
  JobQueue,
  RollingLoop,
  SequenceStepper,
} from '@kiln/batching';
import { loadTextTokenizer } from '@kiln/core';
import { loadOrtStepDecoder, probeOrt } from '@kiln/engine-onnxruntime';
import { gptDecoderModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GenerationPool, createGenerationPool } from './generation-pool.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

describe.skipIf(!run)('a generation pool over ONNX Runtime step decoders', () => {
  let dir: string;
  let pool: GenerationPool;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-pool-ort-gpt-'));
    await gptDecoderModel(dir, {
      layers: 2,
      hidden: 32,
      heads: 4,
      maxLen: 128,
      properties: {
        engine: 'OnnxRuntime',
        'option.rolling_batch': 'auto',
        'option.max_rolling_batch_size': '4',
        'option.max_rolling_batch_prefill_tokens': '16',
      },
    });
    pool = await createGenerationPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings: { cores: 2, minWorkers: 1, maxWorkers: 2 },
    });
  });
  afterAll(async () => {
    await pool?.shutdown();
    await rm(dir, { recursive: true, force: true });
  });

  /** A job decoded alone on this thread, by the same decoder, sampler and detokenizer. */
  async function alone(job: GenerationJob): Promise<GenerationOutput> {
    const decoder = await loadOrtStepDecoder(dir, { session: { intraOpNumThreads: 1 } });
    const stepper = new SequenceStepper(decoder, await loadTextTokenizer(dir));
    try {
      const loop = new RollingLoop(stepper, stepper.info, { maxBatchSize: 1 });
      const queue = new JobQueue<GenerationJob, GenerationOutput>();
      const handle = queue.submit(job);
      await loop.run(queue.takeNow(1), () => []);
      return await handle.result;
    } finally {
      await stepper.close();
    }
  }

  it('decodes on the worker threads what the model decodes alone, greedy and seeded, streaming', async () => {
    expect(pool.kind).toBe('step');
    const prompts = [
      'Hello, world',
      'The quick brown fox jumps over the lazy dog. '.repeat(2),
      'a',
    ];
    const jobs: GenerationJob[] = [];
    for (const [i, prompt] of prompts.entries()) {
      const promptTokens = await pool.encode(prompt);
      const sampling = { doSample: true, topK: 8, topP: 0.9, seed: i };
      jobs.push({ promptTokens, maxNewTokens: 24 }, { promptTokens, maxNewTokens: 24, sampling });
    }
    const chunks = jobs.map(() => [] as GenerationChunk[]);
    const outputs = await Promise.all(
      jobs.map((job, i) =>
        pool.predict(job, { onChunk: (chunk) => void chunks[i]!.push(chunk as GenerationChunk) }),
      ),
    );
    for (const [i, output] of outputs.entries()) {
      const reference = await alone(jobs[i]!);
      expect(output.tokens, `job ${i}`).toEqual(reference.tokens);
      expect(output.text).toBe(reference.text);
      expect(chunks[i]!.map((c) => c.text).join('')).toBe(output.text);
    }
    expect(pool.limits.maxSequenceLength).toBe(128);
    expect(pool.eosTokenId).toBe(0);
  });
});
