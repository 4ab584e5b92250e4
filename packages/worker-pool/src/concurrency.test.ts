import { rm } from 'node:fs/promises';
import type { JobHandle } from '@kiln/batching';
import {
  CPU,
  KilnError,
  KilnErrorCode,
  type ServingInput,
  type ServingOutput,
  servingPropertiesFrom,
} from '@kiln/core';
import { afterAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import { vectorBody } from './test-fixtures/json-translator.js';
import { RowTranslator } from './test-fixtures/gated-model.js';
import { CRASH_EXIT, provider } from './test-fixtures/scale-engine.js';
import {
  JSON_TRANSLATOR_MODULE,
  SCALE_ENGINE_MODULE,
  writeScaleModel,
} from './test-fixtures/scale-model-folder.js';
import type { WorkerPool } from './worker-pool.js';
import { seededRandom } from '@kiln/testing';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

const BURST = 250;

interface Plan {
  readonly x: number[];
  readonly cancelAfterMs: number | undefined;
  readonly timeoutMs: number | undefined;
  readonly crash: boolean;
}

/** Crashing jobs sit in the first burst, which the empty queue accepts whole, so each runs. */
function plans(count: number, seed: number, crashes = 0): Plan[] {
  const random = seededRandom(seed);
  const crashAt = new Set(Array.from({ length: crashes }, () => Math.floor(random() * BURST)));
  return Array.from({ length: count }, (_, i) => {
    const length = 1 + Math.floor(random() * 5);
    const roll = random();
    const crash = crashAt.has(i);
    return {
      x: Array.from({ length }, () => Math.floor(random() * 1000) - 500), // clear of the engine's triggers (666…)
      cancelAfterMs: roll < 0.1 && !crash ? Math.floor(random() * 20) : undefined,
      timeoutMs: roll >= 0.1 && roll < 0.2 && !crash ? 1 + Math.floor(random() * 30) : undefined,
      crash,
    };
  });
}

type Verdict = { ok: true; y: number[] } | { ok: false; code: string };

/** Fires every plan in bursts that overfill the queue, cancelling and timing out as planned. */
async function fire<I, O>(
  pool: WorkerPool<I, O>,
  all: readonly Plan[],
  input: (plan: Plan) => I,
  output: (value: O) => number[],
): Promise<Verdict[]> {
  const pending: Promise<Verdict>[] = [];
  for (let start = 0; start < all.length; start += BURST) {
    for (const plan of all.slice(start, start + BURST)) {
      const handle: JobHandle<O> = pool.submit(
        input(plan),
        plan.timeoutMs === undefined ? {} : { timeoutMs: plan.timeoutMs },
      );
      if (plan.cancelAfterMs !== undefined) setTimeout(() => handle.cancel(), plan.cancelAfterMs);
      pending.push(
        handle.result.then(
          (value) => ({ ok: true as const, y: output(value) }),
          (error: unknown) => ({
            ok: false as const,
            code: error instanceof KilnError ? error.code : `not a KilnError: ${String(error)}`,
          }),
        ),
      );
    }
    // Let the queue half-empty before the next burst: each burst overfills it a little.
    for (
      let wait = 0;
      wait < 1000 && pool.stats().queueDepth > pool.stats().queueCapacity / 2;
      wait++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }
  return Promise.all(pending);
}

/**
 * Each caller gets its own answer (2 · its x, which no other caller's answer equals by
 * chance often enough to hide a mix-up: rows differ in length and values) or an error that
 * its plan explains.
 */
function check(
  all: readonly Plan[],
  verdicts: readonly Verdict[],
  crashCodes: readonly string[] = [],
): Record<string, number> {
  const counts: Record<string, number> = {};
  verdicts.forEach((verdict, i) => {
    const plan = all[i]!;
    const key = verdict.ok ? 'ok' : verdict.code;
    counts[key] = (counts[key] ?? 0) + 1;
    if (verdict.ok) {
      expect(plan.crash).toBe(false);
      expect(verdict.y).toEqual(plan.x.map((v) => 2 * v));
      return;
    }
    const allowed = [KilnErrorCode.QueueFull, ...crashCodes];
    if (plan.cancelAfterMs !== undefined) allowed.push(KilnErrorCode.Cancelled);
    if (plan.timeoutMs !== undefined) allowed.push(KilnErrorCode.Timeout);
    expect(allowed, `job ${i} failed with ${verdict.code}`).toContain(verdict.code);
  });
  return counts;
}

describe('thousands of concurrent jobs', () => {
  it('inline workers: each caller gets its own answer or a clear error', async () => {
    const engine = await provider.load();
    const dir = await writeScaleModel(2);
    dirs.push(dir);
    const model = await engine.loadModel({
      name: 'scale',
      modelDir: dir,
      device: CPU,
      options: { sleepMs: '1' },
      properties: servingPropertiesFrom({}),
    });
    const pool = await createWorkerPool({
      model: { shared: model, translator: new RowTranslator() },
      settings: {
        minWorkers: 1,
        maxWorkers: 4,
        batchSize: 8,
        maxBatchDelayMs: 2,
        jobQueueSize: 400,
      },
    });
    const all = plans(3000, 42);
    const verdicts = await fire(
      pool,
      all,
      (plan) => plan.x,
      (value) => value,
    );
    const counts = check(all, verdicts);
    expect(counts.ok).toBeGreaterThan(1000);
    await pool.shutdown();
    const stats = pool.stats();
    expect(stats.queueDepth).toBe(0);
    expect(stats.totals.accepted + (counts[KilnErrorCode.QueueFull] ?? 0)).toBe(all.length);
    expect(stats.totals.succeeded).toBe(counts.ok);
  });

  it('thread workers, some crashing: each caller gets its own answer or a clear error', async () => {
    const dir = await writeScaleModel(2);
    dirs.push(dir);
    const pool = await createWorkerPool({
      model: { url: dir, engines: [SCALE_ENGINE_MODULE], translator: JSON_TRANSLATOR_MODULE },
      settings: {
        cores: 2,
        minWorkers: 2,
        maxWorkers: 2,
        batchSize: 8,
        maxBatchDelayMs: 2,
        jobQueueSize: 300,
        placement: 'thread',
      },
    });
    const all = plans(1200, 7, 3);
    const verdicts = await fire(
      pool,
      all,
      (plan): ServingInput => vectorBody(plan.crash ? [CRASH_EXIT] : plan.x),
      (value: ServingOutput) => (value.type === 'json' ? (value.value as { y: number[] }).y : []),
    );
    const counts = check(all, verdicts, [KilnErrorCode.WorkerCrashed]);
    expect(counts.ok).toBeGreaterThan(500);
    // Only the crashing jobs fail with WORKER_CRASHED: the rest of their batches ran again.
    expect(counts[KilnErrorCode.WorkerCrashed] ?? 0).toBeLessThanOrEqual(3);
    // Each crashing job ends a worker in its batch, then one more alone; two may share a batch.
    expect(pool.stats().totals.crashes).toBeGreaterThanOrEqual(1);
    expect(pool.stats().totals.crashes).toBeLessThanOrEqual(6);
    await pool.shutdown();
  });
});
