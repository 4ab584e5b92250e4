import { KilnError } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { HashDecoder } from '../test-support/hash-decoder.js';
import { flush } from '../test-support/promises.js';
import { type GenerationRequest, RollingScheduler } from './rolling-scheduler.js';
import { SeededSource, randomWorkload } from './test-workload.js';

async function alone(request: GenerationRequest, vocab: number): Promise<readonly number[]> {
  const scheduler = new RollingScheduler(new HashDecoder(vocab), { maxBatchSize: 1 });
  return (await scheduler.generate(request)).tokens;
}

/** Submits the requests at random step counts, as if they arrived over time. */
async function rolling(
  scheduler: RollingScheduler<unknown>,
  requests: readonly GenerationRequest[],
  random: SeededSource,
): Promise<(readonly number[])[]> {
  const results: Promise<readonly number[]>[] = [];
  for (const request of requests) {
    results.push(scheduler.generate(request).then((r) => r.tokens));
    for (let i = random.int(6); i > 0; i--) await flush();
  }
  return Promise.all(results);
}

describe('RollingScheduler', () => {
  it('gives every greedy request the tokens it gets alone, whatever joins or leaves its batch', async () => {
    const random = new SeededSource(7);
    const requests = randomWorkload(random, {
      count: 40,
      vocab: 50,
      maxPrompt: 256,
      maxOutput: 256,
    });
    const decoder = new HashDecoder(50);
    const scheduler = new RollingScheduler(decoder, { maxBatchSize: 8, maxPrefillTokens: 64 });
    const batched = await rolling(scheduler, requests, random);
    for (const [i, request] of requests.entries())
      expect(batched[i], `request ${i}`).toEqual(await alone(request, 50));
    expect(Math.max(...decoder.steps.map((s) => s.sequences))).toBe(8);
    expect(Math.max(...decoder.steps.map((s) => s.prefillTokens))).toBeLessThanOrEqual(64);
    expect(decoder.openCount).toBe(0);
    expect(scheduler.stats()).toMatchObject({ active: 0, waiting: 0, cacheTokensReserved: 0 });
  });

  it('reproduces seeded sampling per request regardless of batch company', async () => {
    const random = new SeededSource(3);
    const requests = randomWorkload(random, {
      count: 24,
      vocab: 50,
      maxPrompt: 64,
      maxOutput: 64,
    }).map((r, i) => ({
      ...r,
      sampling: { doSample: true, temperature: 0.8, topK: 20, topP: 0.9, seed: i },
    }));
    const scheduler = new RollingScheduler(new HashDecoder(50), {
      maxBatchSize: 6,
      maxPrefillTokens: 32,
    });
    const batched = await rolling(scheduler, requests, random);
    for (const [i, request] of requests.entries())
      expect(batched[i], `request ${i}`).toEqual(await alone(request, 50));
    // Sampling is not greedy: at least one request differs from its greedy decoding.
    const greedy = await Promise.all(requests.map((r) => alone({ ...r, sampling: {} }, 50)));
    expect(greedy.some((g, i) => g.join() !== batched[i]!.join())).toBe(true);
  });

  it('keeps decoding running sequences while a long prompt is prefilled in chunks', async () => {
    const decoder = new HashDecoder(50);
    const scheduler = new RollingScheduler(decoder, { maxBatchSize: 4, maxPrefillTokens: 16 });
    const steps: number[] = [];
    const running = scheduler.generate({
      promptTokens: [1, 2, 3],
      maxNewTokens: 40,
      onToken: () => steps.push(scheduler.stats().steps),
    });
    await flush();
    await flush();
    const long = scheduler.generate({
      promptTokens: Array.from({ length: 200 }, (_, i) => i % 50),
      maxNewTokens: 2,
    });
    await Promise.all([running, long]);
    // One token per step for the running sequence, also during the 13 steps of the long prefill.
    const gaps = steps.slice(1).map((s, i) => s - steps[i]!);
    expect(new Set(gaps)).toEqual(new Set([1]));
    expect(decoder.steps.filter((s) => s.prefillTokens > 0).length).toBeGreaterThanOrEqual(13);
  });

  it('streams tokens and stops at max tokens, end of sequence and stop conditions', async () => {
    const scheduler = new RollingScheduler(new HashDecoder(50));
    const streamed: number[] = [];
    const first = await scheduler.generate({
      promptTokens: [5],
      maxNewTokens: 12,
      onToken: (t, i) => streamed.push(i === streamed.length ? t : -1),
    });
    expect(first.finishReason).toBe('length');
    expect(streamed).toEqual(first.tokens);
    expect(first.timeToFirstTokenMs).toBeGreaterThanOrEqual(0);
    expect(first.interTokenMs).toHaveLength(11);

    const eos = first.tokens[4]!;
    const untilEos = await scheduler.generate({
      promptTokens: [5],
      maxNewTokens: 12,
      eosTokenId: eos,
    });
    expect(untilEos.finishReason).toBe('eos');
    expect(untilEos.tokens).toEqual(first.tokens.slice(0, first.tokens.indexOf(eos)));

    const stopped = await scheduler.generate({
      promptTokens: [5],
      maxNewTokens: 12,
      isStop: (generated) => generated.length === 3,
    });
    expect(stopped).toMatchObject({ finishReason: 'stop', tokens: first.tokens.slice(0, 3) });
  });

  it('frees the slot of a cancelled request at the next step', async () => {
    const decoder = new HashDecoder(50);
    const scheduler = new RollingScheduler(decoder, { maxBatchSize: 1 });
    const controller = new AbortController();
    let seen = 0;
    const gone = scheduler.generate({
      promptTokens: [1],
      maxNewTokens: 1000,
      signal: controller.signal,
      onToken: () => ++seen === 3 && controller.abort(),
    });
    const next = scheduler.generate({ promptTokens: [2], maxNewTokens: 2 });
    expect(await gone).toMatchObject({ finishReason: 'cancelled' });
    expect((await gone).tokens).toHaveLength(3);
    expect(await next).toMatchObject({ finishReason: 'length' });
    expect(decoder.openCount).toBe(0);
  });

  it('queues requests while the cache budget is reserved, and refuses ones that can never fit', async () => {
    const decoder = new HashDecoder(50, 100);
    const scheduler = new RollingScheduler(decoder, { maxBatchSize: 8, maxCacheTokens: 60 });
    let most = 0;
    scheduler.onStep(() => (most = Math.max(most, scheduler.stats().cacheTokensReserved)));
    const requests = Array.from({ length: 6 }, (_, i) =>
      scheduler.generate({ promptTokens: [i + 1], maxNewTokens: 19 }),
    );
    await flush();
    expect(scheduler.stats()).toMatchObject({ active: 3, waiting: 3, cacheTokensReserved: 60 });
    await Promise.all(requests);
    expect(most).toBeLessThanOrEqual(60);
    await expect(scheduler.generate({ promptTokens: [1], maxNewTokens: 60 })).rejects.toThrow(
      /exceeds the model's limit of 60 tokens/,
    );
    await expect(scheduler.generate({ promptTokens: [], maxNewTokens: 1 })).rejects.toSatisfy((e) =>
      KilnError.is(e, 'INVALID_INPUT'),
    );
    await expect(scheduler.generate({ promptTokens: [50], maxNewTokens: 1 })).rejects.toThrow(
      /\[0, 50\)/,
    );
    await expect(
      scheduler.generate({ promptTokens: [1], maxNewTokens: 1, sampling: { topP: 2 } }),
    ).rejects.toThrow(/top_p/);
  });

  it('tells when it has drained, and fails what is left when closed', async () => {
    const scheduler = new RollingScheduler(new HashDecoder(50), { maxBatchSize: 2 });
    await scheduler.whenIdle();
    let done = 0;
    for (let i = 0; i < 4; i++)
      void scheduler.generate({ promptTokens: [i], maxNewTokens: 10 }).then(() => done++);
    await scheduler.whenIdle();
    expect(done).toBe(4);
    const cut = scheduler.generate({ promptTokens: [1], maxNewTokens: 500 });
    await flush();
    scheduler.close();
    await expect(cut).rejects.toSatisfy((e) => KilnError.is(e, 'CLOSED'));
    await expect(scheduler.generate({ promptTokens: [1], maxNewTokens: 1 })).rejects.toThrow(
      /unloading/,
    );
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
    const scheduler = new RollingScheduler(decoder, { maxBatchSize: 4 });
    const failing = scheduler.generate({
      promptTokens: [1],
      maxNewTokens: 5,
      onToken: () => (failNext = true),
    });
    await expect(failing).rejects.toThrow('engine failed');
    expect(await scheduler.generate({ promptTokens: [1], maxNewTokens: 5 })).toMatchObject({
      finishReason: 'length',
    });
    expect(decoder.openCount).toBe(0);
  });
});
