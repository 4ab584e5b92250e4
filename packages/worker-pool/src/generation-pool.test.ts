import { rm } from 'node:fs/promises';
import {
  type GenerationChunk,
  type GenerationJob,
  type GenerationOutput,
  JobQueue,
  RollingLoop,
  SequenceStepper,
} from '@kiln/batching';
import { CharTokenizer, KilnErrorCode } from '@kiln/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import { type GenerationPool, createGenerationPool } from './generation-pool.js';
import type { WorkerPoolSettingsInput } from './settings.js';
import {
  CRASH_CHAR,
  FAIL_CHAR,
  HashStepDecoder,
  STEP_ENGINE_MODULE,
  STEP_VOCAB,
  writeStepModel,
} from './test-fixtures/step-engine.js';

const tokenizer = new CharTokenizer(STEP_VOCAB);
const dirs: string[] = [];
const pools: GenerationPool[] = [];
let modelDir: string;

beforeAll(async () => {
  modelDir = await model({ 'option.max_rolling_batch_size': '4' });
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.shutdown({ timeoutMs: 5000 })));
});
afterAll(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function model(properties: Record<string, string>): Promise<string> {
  const dir = await writeStepModel(properties);
  dirs.push(dir);
  return dir;
}

async function pool(
  settings: WorkerPoolSettingsInput = {},
  dir = modelDir,
): Promise<GenerationPool> {
  const created = await createGenerationPool({
    model: { url: dir, engines: [STEP_ENGINE_MODULE] },
    settings: { cores: 2, minWorkers: 1, maxWorkers: 1, ...settings },
  });
  pools.push(created);
  return created;
}

/** The same job run alone on this thread: one sequence, nothing else in its steps. */
async function alone(job: GenerationJob): Promise<GenerationOutput> {
  const stepper = new SequenceStepper(new HashStepDecoder(STEP_VOCAB.length, 512), tokenizer);
  const loop = new RollingLoop(stepper, stepper.info, { maxBatchSize: 1 });
  const queue = new JobQueue<GenerationJob, GenerationOutput>();
  const handle = queue.submit(job);
  await loop.run(queue.takeNow(1), () => []);
  return handle.result;
}

function job(prompt: string, maxNewTokens: number, extra: Partial<GenerationJob> = {}) {
  return { promptTokens: tokenizer.encode(prompt), maxNewTokens, ...extra };
}

const PROMPTS = ['hello world', 'the quick brown fox', 'a', 'jumps over the lazy dog.', 'zz'];

describe('createGenerationPool', () => {
  it('answers every greedy job as the model does alone, streaming chunks before each ends', async () => {
    const generation = await pool();
    expect(generation.kind).toBe('step');
    expect(generation.eosTokenId).toBe(0);
    expect(generation.limits.maxSequenceLength).toBe(512);
    const steps: { ms: number; hostMs: number; sequences: number }[] = [];
    generation.onStep((step) => steps.push(step));
    const jobs = PROMPTS.flatMap((p, i) => [job(p, 20 + i * 7), job(p, 40, { stop: ['e'] })]);
    const streamed = jobs.map(() => [] as GenerationChunk[]);
    const ended: boolean[] = jobs.map(() => false);
    const outputs = await Promise.all(
      jobs.map((j, i) =>
        generation
          .predict(j, {
            onChunk: (chunk) => {
              expect(ended[i]).toBe(false);
              streamed[i]!.push(chunk as GenerationChunk);
            },
          })
          .then((output) => ((ended[i] = true), output)),
      ),
    );
    for (const [i, output] of outputs.entries()) {
      expect(output, `job ${i}`).toEqual({
        ...(await alone(jobs[i]!)),
        timeToFirstTokenMs: expect.any(Number),
        interTokenMs: expect.any(Array),
      });
      expect(streamed[i]!.map((c) => c.text).join('')).toBe(output.text);
      expect(streamed[i]!.map((c) => c.token)).toEqual(output.tokens);
    }
    expect(outputs.some((o) => o.finishReason === 'stop')).toBe(true);
    for (const output of outputs.filter((o) => o.finishReason === 'stop'))
      expect(output.text).not.toContain('e');
    expect(Math.max(...steps.map((s) => s.sequences))).toBe(4);
    for (const step of steps) expect(step.hostMs).toBeLessThanOrEqual(step.ms + 1);
    const stats = generation.stats();
    expect(stats.totals).toMatchObject({
      accepted: jobs.length,
      succeeded: jobs.length,
      failed: 0,
    });
    expect(generation.generation()).toMatchObject({ active: 0, waiting: 0, cacheTokensUsed: 0 });
  });

  it('streams log-probabilities when asked, and holds a job while its reader waits', async () => {
    // Steps as long as a small model's: the hold reaches the loop within a step or so.
    const generation = await pool({}, await model({ 'option.stepMs': '5' }));
    const chunks: GenerationChunk[] = [];
    let release!: () => void;
    const output = generation.predict(job('hello', 12, { logprobs: true }), {
      onChunk: (chunk) => {
        chunks.push(chunk as GenerationChunk);
        if (chunks.length === 2) return new Promise<void>((resolve) => (release = resolve));
      },
    });
    // The hold reaches the worker's loop a step or so later: a piece or two more may come,
    // then nothing until the reader drains.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const held = chunks.length;
    expect(held).toBeLessThanOrEqual(4);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(chunks).toHaveLength(held);
    release();
    const answer = await output;
    expect(chunks.map((c) => c.token)).toEqual(answer.tokens);
    for (const chunk of chunks) expect(chunk.logprob).toBeLessThan(0);
  });

  it('frees a cancelled job slot at the next step', async () => {
    const generation = await pool(
      {},
      await model({ 'option.max_rolling_batch_size': '1', 'option.stepMs': '5' }),
    );
    let seen = 0;
    const handle = generation.submit(job('hello', 400), {
      onChunk: () => {
        if (++seen === 3) handle.cancel();
      },
    });
    const next = generation.predict(job('world', 5));
    await expect(handle.result).rejects.toMatchObject({ code: KilnErrorCode.Cancelled });
    expect(await next).toEqual({
      ...(await alone(job('world', 5))),
      timeToFirstTokenMs: expect.any(Number),
      interTokenMs: expect.any(Array),
    });
    expect(seen).toBeLessThan(6);
    expect(generation.stats().totals).toMatchObject({ cancelled: 1, succeeded: 1 });
  });

  it('admits waiting jobs in arrival order, or most max_new_tokens first with rolling_batch_admission=longest_first', async () => {
    for (const admission of ['first_come', 'longest_first']) {
      const generation = await pool(
        {},
        await model({
          'option.max_rolling_batch_size': '1',
          'option.stepMs': '5',
          'option.rolling_batch_admission': admission,
        }),
      );
      const started: number[] = [];
      const generate = (maxNewTokens: number, onStart?: () => void) =>
        generation.predict(job('hello', maxNewTokens, { ignoreEos: true }), {
          onChunk: (chunk) => {
            if ((chunk as GenerationChunk).index !== 0) return;
            started.push(maxNewTokens);
            onStart?.();
          },
        });
      let running!: () => void;
      const first = new Promise<void>((resolve) => (running = resolve));
      const all = [generate(20, running)];
      await first;
      for (const n of [3, 12, 6]) all.push(generate(n));
      await Promise.all(all);
      expect(started, admission).toEqual(
        admission === 'first_come' ? [20, 3, 12, 6] : [20, 12, 6, 3],
      );
    }
    await expect(
      pool({}, await model({ 'option.rolling_batch_admission': 'shortest_first' })),
    ).rejects.toThrow(
      /option.rolling_batch_admission=shortest_first is not one of first_come, longest_first/,
    );
  });

  it('refuses a full queue, times out a job that waits too long, and refuses jobs that can never run', async () => {
    const generation = await pool(
      { jobQueueSize: 1 },
      await model({ 'option.max_rolling_batch_size': '1', 'option.stepMs': '5' }),
    );
    const running = generation.predict(job('hello', 60));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const waiting = generation.predict(job('world', 2), { timeoutMs: 30 });
    await expect(generation.predict(job('x', 2))).rejects.toMatchObject({
      code: KilnErrorCode.QueueFull,
    });
    await expect(waiting).rejects.toMatchObject({ code: KilnErrorCode.Timeout });
    expect((await running).tokens.length).toBeGreaterThan(0);
    await expect(generation.predict(job('hello', 600))).rejects.toMatchObject({
      code: KilnErrorCode.InvalidInput,
      message: expect.stringMatching(/exceeds the model's limit of 512 tokens/),
    });
    await expect(generation.predict({ promptTokens: [99], maxNewTokens: 1 })).rejects.toMatchObject(
      {
        code: KilnErrorCode.InvalidInput,
      },
    );
    expect(generation.stats().totals).toMatchObject({ expired: 1, rejected: 3 });
  });

  it('fails only the jobs of a failed step, and only the jobs of a worker that died, which is replaced', async () => {
    const generation = await pool({}, await model({ 'option.max_rolling_batch_size': '1' }));
    await expect(generation.predict(job(`he${FAIL_CHAR}llo`, 5))).rejects.toMatchObject({
      code: KilnErrorCode.EngineError,
    });
    expect(await generation.predict(job('world', 30))).toMatchObject({ finishReason: 'length' });

    const crashed = generation.predict(job(`a${CRASH_CHAR}`, 5));
    const queued = [generation.predict(job('hello', 5)), generation.predict(job('world', 5))];
    await expect(crashed).rejects.toMatchObject({ code: KilnErrorCode.WorkerCrashed });
    // One sequence at a time: the jobs the dead worker had not admitted run on its replacement.
    for (const answer of await Promise.all(queued)) expect(answer.finishReason).toBe('length');
    expect(await generation.predict(job('hello', 5))).toMatchObject({
      finishReason: expect.any(String),
    });
    expect(generation.stats().totals.crashes).toBe(1);
  });

  it('scales 1 → 2 → 1 workers while serving, losing no job', async () => {
    const generation = await pool(
      { minWorkers: 1, maxWorkers: 1 },
      await model({ 'option.max_rolling_batch_size': '2', 'option.stepMs': '3' }),
    );
    const jobs = Array.from({ length: 12 }, (_, i) => job(PROMPTS[i % PROMPTS.length]!, 15 + i));
    const answers = jobs.map((j) => generation.predict(j));
    await generation.scale({ minWorkers: 2, maxWorkers: 2 });
    expect(generation.describe().workerGroups[0]!.workers).toHaveLength(2);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await generation.scale({ minWorkers: 1, maxWorkers: 1 });
    const outputs = await Promise.all(answers);
    for (const [i, output] of outputs.entries())
      expect(output.tokens, `job ${i}`).toEqual((await alone(jobs[i]!)).tokens);
    while (generation.describe().workerGroups[0]!.workers.length > 1)
      await new Promise((resolve) => setTimeout(resolve, 10));
    expect(generation.stats().totals).toMatchObject({ succeeded: 12, failed: 0 });
  });

  it('starts a worker for a job when it has none, and lets it go after max_idle_time', async () => {
    const generation = await pool({ minWorkers: 0, maxWorkers: 1, maxIdleTimeS: 0.2 });
    expect(generation.describe().workerGroups[0]!.workers).toHaveLength(0);
    expect(generation.limits.maxSequenceLength).toBe(0);
    // Limits are known to the worker: a job that can never run fails there.
    await expect(generation.predict(job('hello', 600))).rejects.toMatchObject({
      code: KilnErrorCode.InvalidInput,
    });
    expect(await generation.predict(job('hello', 5))).toMatchObject({ finishReason: 'length' });
    expect(generation.limits.maxSequenceLength).toBe(512);
    while (generation.describe().workerGroups[0]!.workers.length > 0)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await generation.predict(job('world', 5))).toMatchObject({ finishReason: 'length' });
  });

  it('is refused by createWorkerPool, whose jobs are tensors', async () => {
    await expect(
      createWorkerPool({ model: { url: modelDir, engines: [STEP_ENGINE_MODULE] } }),
    ).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
      message: expect.stringMatching(/createGenerationPool/),
    });
  });
});
