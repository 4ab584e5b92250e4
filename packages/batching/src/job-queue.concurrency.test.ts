import { KilnError, KilnErrorCode } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import type { BucketKey } from './job.js';
import { JobQueue } from './job-queue.js';
import { ManualClock } from './manual-clock.js';
import { flush } from './test-support/promises.js';
import { seededRandom } from '@kiln/testing';

interface Input {
  readonly token: number;
  /** The fake engine fails this input. */
  readonly fail: boolean;
}

interface Record {
  readonly input: Input;
  readonly id: number;
  readonly timeoutMs: number | undefined;
  readonly refusedAtSubmit: boolean;
  cancelRequested: boolean;
  outcome: { ok: true; value: string } | { ok: false; error: unknown } | undefined;
}

const JOBS = 3000;
const CONSUMERS = 3;
const STEP_LIMIT = 20_000;

/**
 * Fires JOBS jobs with random arrival, timeouts and cancellations at a small queue drained by
 * fake workers that take random batch sizes and delays and run for random times, all on a
 * manual clock. Returns how the jobs ended, after checking every rule on the way.
 */
async function simulate(seed: number, bucketed: boolean): Promise<Map<string, number>> {
  const random = seededRandom(seed);
  const int = (n: number) => Math.floor(random() * n);
  const clock = new ManualClock();
  const queue = new JobQueue<Input, string>({
    clock,
    capacity: 48,
    bucketOf: bucketed ? (input) => input.token % 3 : undefined,
  });
  const refused = new Set<number>();
  const handedOut = new Set<number>();
  const lastTakenInBucket = new Map<BucketKey | undefined, number>();
  queue.on('rejected', (job) => refused.add(job.id));
  queue.on('enqueued', () => expect(queue.depth).toBeLessThanOrEqual(queue.capacity));
  queue.on('batch', (jobs) => {
    // Expired and cancelled jobs never reach a worker.
    expect(jobs.filter((job) => job.settled)).toEqual([]);
  });
  queue.on('taken', (job) => {
    // Within a bucket, jobs leave in the order they came.
    expect(job.id).toBeGreaterThan(lastTakenInBucket.get(job.bucket) ?? 0);
    lastTakenInBucket.set(job.bucket, job.id);
  });

  const sleep = (ms: number) => new Promise<void>((resolve) => clock.setTimeout(resolve, ms));
  const consume = async (): Promise<number> => {
    let batches = 0;
    for (;;) {
      const maxSize = 1 + int(8);
      const batch = await queue.takeBatch({ maxSize, maxDelayMs: int(6) });
      if (batch.length === 0) return batches;
      batches++;
      expect(batch.length).toBeLessThanOrEqual(maxSize);
      for (const job of batch) {
        expect(job.bucket).toBe(batch[0]!.bucket);
        expect(handedOut.has(job.id)).toBe(false);
        handedOut.add(job.id);
      }
      await sleep(int(5));
      for (const job of batch) {
        if (job.settled) continue; // cancelled while it ran
        if (job.deadline !== undefined && clock.now() > job.deadline) {
          job.reject(new KilnError(KilnErrorCode.Timeout, 'deadline passed before it ran'));
        } else if (job.input.fail) {
          job.reject(new KilnError(KilnErrorCode.EngineError, 'engine failed'));
        } else {
          job.resolve(`answer-${job.input.token}`);
        }
      }
    }
  };
  const consumers = Array.from({ length: CONSUMERS }, consume);

  const records: Record[] = [];
  let steps = 0;
  while (records.length < JOBS) {
    // Mostly a steady trickle, now and then a burst bigger than the queue.
    const arrivals = random() < 0.03 ? 60 : int(6);
    for (let k = arrivals; k > 0 && records.length < JOBS; k--) {
      const input: Input = { token: records.length, fail: random() < 0.05 };
      const timeoutMs = random() < 0.3 ? 1 + int(40) : undefined;
      const controller = random() < 0.5 ? new AbortController() : undefined;
      const handle = queue.submit(input, { timeoutMs, signal: controller?.signal });
      const record: Record = {
        input,
        id: handle.id,
        timeoutMs,
        refusedAtSubmit: refused.has(handle.id),
        cancelRequested: false,
        outcome: undefined,
      };
      handle.result.then(
        (value) => (record.outcome = { ok: true, value }),
        (error: unknown) => (record.outcome = { ok: false, error }),
      );
      if (random() < 0.12) {
        clock.setTimeout(() => {
          record.cancelRequested = true;
          if (controller) controller.abort();
          else handle.cancel();
        }, int(30));
      }
      records.push(record);
    }
    clock.advance(1);
    await flush();
    steps++;
  }
  while (records.some((r) => r.outcome === undefined) && steps++ < STEP_LIMIT) {
    clock.advance(1);
    await flush();
  }
  expect(records.filter((r) => r.outcome === undefined).map((r) => r.id)).toEqual([]);
  expect(queue.depth).toBe(0);

  queue.close();
  while (clock.nextDue() !== undefined && steps++ < STEP_LIMIT) {
    clock.advance(1);
    await flush();
  }
  const batches = await Promise.all(consumers);
  expect(batches.every((n) => n > 0)).toBe(true);
  expect(clock.pending).toBe(0); // no deadline or delay timer left behind

  const outcomes = new Map<string, number>();
  for (const r of records) {
    const outcome = r.outcome!;
    let kind: string;
    if (outcome.ok) {
      expect(outcome.value).toBe(`answer-${r.input.token}`);
      expect(r.input.fail).toBe(false);
      expect(handedOut.has(r.id)).toBe(true);
      kind = 'answered';
    } else {
      expect(outcome.error).toBeInstanceOf(KilnError);
      kind = (outcome.error as KilnError).code;
      const allowed =
        (kind === KilnErrorCode.QueueFull && r.refusedAtSubmit) ||
        (kind === KilnErrorCode.Timeout && r.timeoutMs !== undefined) ||
        (kind === KilnErrorCode.Cancelled && r.cancelRequested) ||
        (kind === KilnErrorCode.EngineError && r.input.fail && handedOut.has(r.id));
      expect(allowed, `job ${r.id} ended with ${kind}`).toBe(true);
    }
    outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
  }
  return outcomes;
}

describe('JobQueue under random concurrent load', () => {
  for (const bucketed of [false, true]) {
    for (const seed of [1, 2, 3]) {
      it(`answers every caller exactly once (seed ${seed}${bucketed ? ', buckets' : ''})`, async () => {
        const outcomes = await simulate(seed, bucketed);
        // Each way a job can end actually happened, so every rule above was exercised.
        for (const kind of ['answered', 'QUEUE_FULL', 'TIMEOUT', 'CANCELLED', 'ENGINE_ERROR']) {
          expect(outcomes.get(kind) ?? 0, kind).toBeGreaterThan(0);
        }
        expect([...outcomes.values()].reduce((a, b) => a + b, 0)).toBe(JOBS);
      });
    }
  }
});
