import { CharTokenizer, KilnErrorCode, type TextTokenizer } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { JobQueue } from '../job-queue.js';
import type { JobOptions } from '../job.js';
import { HashDecoder } from '../test-support/hash-decoder.js';
import { flush } from '../test-support/promises.js';
import type { GenerationChunk, GenerationJob, GenerationOutput } from './generation-job.js';
import { type AdmissionPolicy, admissionRank } from './admission.js';
import { RollingLoop, type RollingLoopOptions, serveQueue } from './rolling-loop.js';
import { SequenceStepper } from './sequence-stepper.js';
import { SeededSource, randomWorkload } from './test-workload.js';

const VOCAB = ['<|endoftext|>', ...'abcdefghijklmnopqrstuvwxyz ._'];
const tokenizer = new CharTokenizer(VOCAB);

/** A step worker in miniature, on this thread. */
function serve(
  decoder: HashDecoder,
  options: RollingLoopOptions & {
    tokenizer?: TextTokenizer;
    eosTokenId?: number;
    admission?: AdmissionPolicy;
  } = {},
) {
  const stepper = new SequenceStepper(decoder, options.tokenizer);
  const loop = new RollingLoop(
    stepper,
    { ...stepper.info, eosTokenId: options.eosTokenId },
    options,
  );
  const queue = new JobQueue<GenerationJob, GenerationOutput>();
  const served = serveQueue(loop, queue, { admission: options.admission ?? 'first_come' });
  return {
    loop,
    queue,
    generate: (job: GenerationJob, jobOptions?: JobOptions) => queue.submit(job, jobOptions).result,
    close: async () => {
      queue.close();
      await served;
    },
  };
}

async function alone(job: GenerationJob, vocab: number): Promise<readonly number[]> {
  const worker = serve(new HashDecoder(vocab), { maxBatchSize: 1 });
  const { tokens } = await worker.generate(job);
  await worker.close();
  return tokens;
}

/** Submits the jobs at random step counts, as if they arrived over time. */
async function rolling(
  worker: ReturnType<typeof serve>,
  jobs: readonly GenerationJob[],
  random: SeededSource,
): Promise<(readonly number[])[]> {
  const results: Promise<readonly number[]>[] = [];
  for (const job of jobs) {
    results.push(worker.generate(job).then((r) => r.tokens));
    for (let i = random.int(6); i > 0; i--) await flush();
  }
  return Promise.all(results);
}

describe('RollingLoop', () => {
  it('gives every greedy job the tokens it gets alone, whatever joins or leaves its batch', async () => {
    const random = new SeededSource(7);
    const jobs = randomWorkload(random, { count: 40, vocab: 50, maxPrompt: 256, maxOutput: 256 });
    const decoder = new HashDecoder(50);
    const worker = serve(decoder, { maxBatchSize: 8, maxPrefillTokens: 64 });
    const batched = await rolling(worker, jobs, random);
    for (const [i, job] of jobs.entries())
      expect(batched[i], `job ${i}`).toEqual(await alone(job, 50));
    expect(Math.max(...decoder.steps.map((s) => s.sequences))).toBe(8);
    expect(Math.max(...decoder.steps.map((s) => s.prefillTokens))).toBeLessThanOrEqual(64);
    await worker.close();
    expect(decoder.openCount).toBe(0);
    expect(worker.loop.stats()).toMatchObject({ active: 0, cacheTokensReserved: 0 });
  });

  it('reproduces seeded sampling per job regardless of batch company', async () => {
    const random = new SeededSource(3);
    const jobs = randomWorkload(random, { count: 24, vocab: 50, maxPrompt: 64, maxOutput: 64 }).map(
      (job, i) => ({
        ...job,
        sampling: { doSample: true, temperature: 0.8, topK: 20, topP: 0.9, seed: i },
      }),
    );
    const worker = serve(new HashDecoder(50), { maxBatchSize: 6, maxPrefillTokens: 32 });
    const batched = await rolling(worker, jobs, random);
    for (const [i, job] of jobs.entries())
      expect(batched[i], `job ${i}`).toEqual(await alone(job, 50));
    // Sampling is not greedy: at least one job differs from its greedy decoding.
    const greedy = await Promise.all(jobs.map((job) => alone({ ...job, sampling: {} }, 50)));
    expect(greedy.some((g, i) => g.join() !== batched[i]!.join())).toBe(true);
    await worker.close();
  });

  it('keeps decoding running sequences while a long prompt is prefilled in chunks', async () => {
    const decoder = new HashDecoder(50);
    const worker = serve(decoder, { maxBatchSize: 4, maxPrefillTokens: 16 });
    const steps: number[] = [];
    const running = worker.generate(
      { promptTokens: [1, 2, 3], maxNewTokens: 40 },
      { onChunk: () => void steps.push(worker.loop.stats().steps) },
    );
    await flush();
    await flush();
    const long = worker.generate({
      promptTokens: Array.from({ length: 200 }, (_, i) => i % 50),
      maxNewTokens: 2,
    });
    await Promise.all([running, long]);
    // One token per step for the running sequence, also during the 13 steps of the long prefill.
    const gaps = steps.slice(1).map((s, i) => s - steps[i]!);
    expect(new Set(gaps)).toEqual(new Set([1]));
    expect(decoder.steps.filter((s) => s.prefillTokens > 0).length).toBeGreaterThanOrEqual(13);
    await worker.close();
  });

  it('streams chunks and ends at max tokens, end of sequence and stop strings, never showing one', async () => {
    const worker = serve(new HashDecoder(VOCAB.length), { tokenizer });
    const job = { promptTokens: tokenizer.encode('hello'), maxNewTokens: 30 };
    const chunks: GenerationChunk[] = [];
    const first = await worker.generate(job, {
      onChunk: (chunk) => void chunks.push(chunk as GenerationChunk),
    });
    expect(first.finishReason).toBe('length');
    expect(chunks.map((c) => c.token)).toEqual(first.tokens);
    expect(chunks.map((c) => c.index)).toEqual(first.tokens.map((_, i) => i));
    expect(chunks.map((c) => c.text).join('')).toBe(first.text);
    expect(first.text).toBe(tokenizer.decode(first.tokens));
    expect(first.timeToFirstTokenMs).toBeGreaterThanOrEqual(0);
    expect(first.interTokenMs).toHaveLength(29);

    const eos = first.tokens[4]!;
    const untilEos = serve(new HashDecoder(VOCAB.length), { tokenizer, eosTokenId: eos });
    const beforeEos = first.tokens.slice(0, first.tokens.indexOf(eos));
    expect(await untilEos.generate(job)).toMatchObject({ finishReason: 'eos', tokens: beforeEos });
    // Text held back for a stop string that never came is sent when the end of text comes.
    const held: GenerationChunk[] = [];
    const heldBack = await untilEos.generate(
      { ...job, stop: [`${tokenizer.decode(beforeEos.slice(-1))}~`] },
      { onChunk: (chunk) => void held.push(chunk as GenerationChunk) },
    );
    expect(heldBack.text).toBe(tokenizer.decode(beforeEos));
    expect(held.map((c) => c.text).join('')).toBe(heldBack.text);
    expect(held.at(-1)).toMatchObject({
      index: beforeEos.length - 1,
      text: heldBack.text.slice(-1),
    });
    await untilEos.close();

    const stop = first.text.slice(6, 8);
    const pieces: string[] = [];
    const stopped = await worker.generate(
      { ...job, stop: [stop] },
      { onChunk: (chunk) => void pieces.push((chunk as GenerationChunk).text) },
    );
    expect(stopped).toMatchObject({
      finishReason: 'stop',
      text: first.text.slice(0, first.text.indexOf(stop)),
    });
    expect(pieces.join('')).toBe(stopped.text);
    await worker.close();
  });

  it("ends a job at any of its own end tokens, as at the model's", async () => {
    const worker = serve(new HashDecoder(VOCAB.length), { tokenizer });
    const job = { promptTokens: tokenizer.encode('hello'), maxNewTokens: 30 };
    const full = await worker.generate(job);
    const [first, second] = [full.tokens[3]!, full.tokens[6]!];
    const ends = [first, second].map((t) => full.tokens.indexOf(t));
    const untilEither = await worker.generate({ ...job, eosTokenIds: [second, first] });
    expect(untilEither).toMatchObject({
      finishReason: 'eos',
      tokens: full.tokens.slice(0, Math.min(...ends)),
    });
    // Benchmarks generate past every end token.
    expect(await worker.generate({ ...job, eosTokenIds: [first], ignoreEos: true })).toMatchObject({
      finishReason: 'length',
      tokens: full.tokens,
    });
    await worker.close();
  });

  it('holds a job while its reader waits, and only that job', async () => {
    const worker = serve(new HashDecoder(50), { maxBatchSize: 2 });
    let release!: () => void;
    let held = 0;
    const slow = worker.generate(
      { promptTokens: [1], maxNewTokens: 5 },
      {
        onChunk: () => {
          held++;
          return new Promise<void>((resolve) => (release = resolve));
        },
      },
    );
    const fast = await worker.generate({ promptTokens: [2], maxNewTokens: 20 });
    expect(fast.tokens).toHaveLength(20);
    expect(held).toBe(1);
    let done = false;
    void slow.then(() => (done = true));
    while (!done) {
      release();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect(held).toBe(5);
    expect((await slow).tokens).toHaveLength(5);
    await worker.close();
  });

  it('frees the slot of a cancelled job at the next step', async () => {
    const decoder = new HashDecoder(50);
    const worker = serve(decoder, { maxBatchSize: 1 });
    let seen = 0;
    const handle = worker.queue.submit(
      { promptTokens: [1], maxNewTokens: 1000 },
      { onChunk: () => void (++seen === 3 && handle.cancel()) },
    );
    const next = worker.generate({ promptTokens: [2], maxNewTokens: 2 });
    await expect(handle.result).rejects.toMatchObject({ code: KilnErrorCode.Cancelled });
    expect(await next).toMatchObject({ finishReason: 'length' });
    expect(seen).toBe(3);
    await worker.close();
    expect(decoder.openCount).toBe(0);
  });

  it('frees the cache of a cancelled job that waited for its share of the prefill', async () => {
    const decoder = new HashDecoder(50);
    const worker = serve(decoder, { maxBatchSize: 2, maxPrefillTokens: 4 });
    const long = worker.generate({ promptTokens: Array(40).fill(1), maxNewTokens: 2 });
    const handle = worker.queue.submit({ promptTokens: [1, 2, 3], maxNewTokens: 2 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(decoder.openCount).toBe(2); // both opened, only the long one fed
    handle.cancel();
    await expect(handle.result).rejects.toMatchObject({ code: KilnErrorCode.Cancelled });
    await long;
    await worker.close();
    expect(decoder.openCount).toBe(0);
  });

  it('leaves jobs queued while the cache budget is reserved, and refuses ones that can never run', async () => {
    const worker = serve(new HashDecoder(50, 100), { maxBatchSize: 8, maxCacheTokens: 60 });
    let most = 0;
    worker.loop.onStep(() => (most = Math.max(most, worker.loop.stats().cacheTokensReserved)));
    const jobs = Array.from({ length: 6 }, (_, i) =>
      worker.generate({ promptTokens: [i + 1], maxNewTokens: 19 }),
    );
    await flush();
    await flush();
    expect(worker.loop.stats()).toMatchObject({ active: 3, cacheTokensReserved: 60 });
    expect(worker.queue.depth).toBe(3);
    await Promise.all(jobs);
    expect(most).toBeLessThanOrEqual(60);
    const refused = (job: GenerationJob) =>
      expect(worker.generate(job)).rejects.toMatchObject({ code: KilnErrorCode.InvalidInput });
    await refused({ promptTokens: [1], maxNewTokens: 60 });
    await expect(worker.generate({ promptTokens: [1], maxNewTokens: 60 })).rejects.toThrow(
      /exceeds the model's limit of 60 tokens/,
    );
    await refused({ promptTokens: [], maxNewTokens: 1 });
    await expect(worker.generate({ promptTokens: [50], maxNewTokens: 1 })).rejects.toThrow(
      /\[0, 50\)/,
    );
    await expect(
      worker.generate({ promptTokens: [1], maxNewTokens: 1, sampling: { topP: 2 } }),
    ).rejects.toThrow(/top_p/);
    await worker.close();
  });

  it('fails the sequences of a failed step and keeps serving others', async () => {
    const decoder = new HashDecoder(50);
    let failNext = false;
    const step = decoder.step.bind(decoder);
    decoder.step = (entries) => {
      if (failNext) {
        failNext = false;
        return Promise.reject(new Error('engine failed'));
      }
      return step(entries);
    };
    const worker = serve(decoder, { maxBatchSize: 4 });
    const failing = worker.generate(
      { promptTokens: [1], maxNewTokens: 5 },
      { onChunk: () => void (failNext = true) },
    );
    await expect(failing).rejects.toThrow('engine failed');
    expect(await worker.generate({ promptTokens: [1], maxNewTokens: 5 })).toMatchObject({
      finishReason: 'length',
    });
    await worker.close();
    expect(decoder.openCount).toBe(0);
  });

  it("decides each step's runs: decode rows split by past at the cost the model reports, prompt chunks apart", async () => {
    const decoder = new HashDecoder(50);
    decoder.decodeRunCost = 4;
    const worker = serve(decoder, { maxBatchSize: 8 });
    const prompt = (n: number) => Array.from({ length: n }, (_, i) => 1 + (i % 40));
    let joined: Promise<unknown> | undefined;
    const jobs = [2, 3, 40, 41].map((n, i) =>
      worker.generate(
        { promptTokens: prompt(n), maxNewTokens: 12 },
        i === 0
          ? {
              onChunk: (chunk: unknown) => {
                if ((chunk as GenerationChunk).index !== 3) return;
                // The model now says a run costs more than any padding: one run from the
                // next change of company, which the job joining now makes.
                decoder.decodeRunCost = Infinity;
                joined = worker.generate({ promptTokens: prompt(5), maxNewTokens: 3 });
              },
            }
          : {},
      ),
    );
    await Promise.all([...jobs, new Promise((r) => setTimeout(r, 0))]);
    await joined;
    await worker.close();
    const runsOf = (entries: { run: number | undefined }[]) => new Set(entries.map((e) => e.run));
    for (const { entries } of decoder.steps) {
      const decoding = entries.filter((e) => e.tokens === 1);
      const prefilling = entries.filter((e) => e.tokens > 1);
      // Prompt chunks never share a run with decode rows.
      for (const run of runsOf(prefilling)) expect(runsOf(decoding).has(run)).toBe(false);
      expect(entries.every((e) => e.run !== undefined)).toBe(true);
    }
    // Until the fifth job came: the four decode in two runs, young and old.
    const joinedAt = decoder.steps.findIndex((s) => s.entries.length === 5);
    const fourDecoding = decoder.steps
      .slice(0, joinedAt)
      .filter((s) => s.entries.length === 4 && s.entries.every((e) => e.tokens === 1));
    expect(fourDecoding.length).toBeGreaterThan(2);
    for (const { entries } of fourDecoding) {
      const young = entries.filter((e) => e.past < 20);
      const old = entries.filter((e) => e.past >= 40);
      expect(young).toHaveLength(2);
      expect(runsOf(young).size).toBe(1);
      expect(runsOf(old).size).toBe(1);
      expect(young[0]!.run).not.toBe(old[0]!.run);
    }
    const fiveDecoding = decoder.steps.filter(
      (s) => s.entries.length === 5 && s.entries.every((e) => e.tokens === 1),
    );
    expect(fiveDecoding.length).toBeGreaterThan(0);
    for (const { entries } of fiveDecoding) expect(runsOf(entries).size).toBe(1);
  });

  it('runs every decode row of a step as one when the model reports no run cost', async () => {
    const random = new SeededSource(11);
    const jobs = randomWorkload(random, { count: 12, vocab: 50, maxPrompt: 64, maxOutput: 32 });
    const decoder = new HashDecoder(50);
    const worker = serve(decoder, { maxBatchSize: 6, maxPrefillTokens: 32 });
    await rolling(worker, jobs, random);
    await worker.close();
    // One run of decode rows and one of prompt chunks at most, each step.
    for (const { entries } of decoder.steps) {
      expect(new Set(entries.map((e) => e.run)).size).toBeLessThanOrEqual(2);
      expect(
        new Set(entries.filter((e) => e.tokens > 1).map((e) => e.run)).size,
      ).toBeLessThanOrEqual(1);
    }
  });

  it('admits waiting jobs longest first (max_new_tokens) with rolling_batch_admission=longest_first', async () => {
    for (const admission of ['first_come', 'longest_first'] as const) {
      const worker = serve(new HashDecoder(50), { maxBatchSize: 1, admission });
      const started: number[] = [];
      const generate = (maxNewTokens: number) =>
        worker.generate(
          { promptTokens: [1, 2], maxNewTokens, ignoreEos: true },
          {
            onChunk: (chunk: unknown) => {
              if ((chunk as GenerationChunk).index === 0) started.push(maxNewTokens);
            },
          },
        );
      // The first runs alone; the others wait for its slot, then go in the policy's order.
      const all = [generate(3)];
      await flush();
      for (const n of [2, 8, 5]) all.push(generate(n));
      await Promise.all(all);
      await worker.close();
      expect(started, admission).toEqual(admission === 'first_come' ? [3, 2, 8, 5] : [3, 8, 5, 2]);
    }
  });
});

describe('admissionRank', () => {
  it('ranks by max_new_tokens, one token more for every step waited', () => {
    const rank = admissionRank('longest_first', () => 10)!;
    const job = (maxNewTokens: number) => ({ promptTokens: [1], maxNewTokens });
    expect(rank(job(8), 0)).toBe(8);
    expect(rank(job(8), 250)).toBe(33);
    expect(admissionRank('first_come', () => 10)).toBeUndefined();
  });
});
