import { rm } from 'node:fs/promises';
import { KilnError, KilnErrorCode, type ServingInput, type ServingOutput } from '@kiln/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import type { WorkerPoolSettingsInput } from './settings.js';
import { vectorBody } from './test-fixtures/json-translator.js';
import { CRASH_EXIT, CRASH_UNCAUGHT, FAIL_FORWARD } from './test-fixtures/scale-engine.js';
import {
  JSON_TRANSLATOR_MODULE,
  SCALE_ENGINE_MODULE,
  writeScaleModel,
} from './test-fixtures/scale-model-folder.js';
import type { WorkerPool } from './worker-pool.js';

// A request that kills its worker (the thread exits, or throws where nothing catches it) in a
// batch of several: the others run again, alone, on a fresh worker, and only it fails.

let modelDir: string;
const pools: WorkerPool<ServingInput, ServingOutput>[] = [];

beforeAll(async () => {
  modelDir = await writeScaleModel(2);
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.shutdown({ timeoutMs: 5000 })));
});
afterAll(async () => {
  await rm(modelDir, { recursive: true, force: true });
});

/** One worker thread; adaptive batching (every input has a batch axis) unless a size is set. */
async function pool(settings: WorkerPoolSettingsInput = {}) {
  const created = await createWorkerPool({
    model: { url: modelDir, engines: [SCALE_ENGINE_MODULE], translator: JSON_TRANSLATOR_MODULE },
    settings: {
      cores: 2,
      minWorkers: 1,
      maxWorkers: 1,
      placement: 'thread',
      ...(settings.batchSize === undefined ? { autoBatchSize: 32 } : {}),
      ...settings,
    },
  });
  pools.push(created);
  return created;
}

/** Counts the workers that became ready, the first one included. */
function countStarts(target: WorkerPool<ServingInput, ServingOutput>): () => number {
  let starts = target.describe().workerGroups[0]!.workers.length;
  target.on('worker', (event) => {
    if (event.previous === 'starting' && event.state === 'idle') starts++;
  });
  return () => starts;
}

type Outcome = { ok: true; y: number[] } | { ok: false; code: string; message: string };

async function outcome(result: Promise<ServingOutput>): Promise<Outcome> {
  try {
    const output = await result;
    return { ok: true, y: output.type === 'json' ? (output.value as { y: number[] }).y : [] };
  } catch (error) {
    if (!(error instanceof KilnError)) throw error;
    return { ok: false, code: error.code, message: error.message };
  }
}

/** `count` innocent requests with the inputs in `killers` among them, all sent at once. */
function burst(
  target: WorkerPool<ServingInput, ServingOutput>,
  count: number,
  killers: ReadonlyMap<number, number>,
): Promise<Outcome[]> {
  const requests: Promise<Outcome>[] = [];
  for (let i = 0; i < count + killers.size; i++) {
    const trigger = killers.get(i);
    requests.push(outcome(target.predict(vectorBody(trigger === undefined ? [i] : [trigger]))));
  }
  return Promise.all(requests);
}

/** Waits until the pool's one worker is idle again (its replacement has started). */
async function settledWorker(target: WorkerPool<ServingInput, ServingOutput>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (target.stats().workers.idle === 1 && target.stats().workers.starting === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('a request that kills its worker', () => {
  for (const [how, trigger] of [
    ['exits its thread', CRASH_EXIT],
    ['throws an uncaught error on its thread', CRASH_UNCAUGHT],
  ] as const) {
    it(`fails alone when it ${how} under adaptive batching`, async () => {
      const target = await pool();
      expect(target.describe().batchSize).toBe(32);
      const starts = countStarts(target);
      const killerAt = 6;
      const outcomes = await burst(target, 12, new Map([[killerAt, trigger]]));
      const killer = outcomes[killerAt]!;
      expect(killer).toMatchObject({ ok: false, code: KilnErrorCode.WorkerCrashed });
      expect(killer.ok ? '' : killer.message).toMatch(/crashed/);
      outcomes.forEach((o, i) => {
        if (i !== killerAt) expect(o, `request ${i}`).toEqual({ ok: true, y: [2 * i] });
      });
      // It died in a batch, then alone; it is not run a third time.
      await settledWorker(target);
      expect(target.stats().totals.crashes).toBe(2);
      expect(starts()).toBe(3);
      expect(target.stats().totals).toMatchObject({ succeeded: 12, failed: 1 });
      expect(await outcome(target.predict(vectorBody([4])))).toEqual({ ok: true, y: [8] });
    });
  }

  it('costs one worker and is not retried when it runs alone (batch_size 1)', async () => {
    const target = await pool({ batchSize: 1, maxBatchDelayMs: 0 });
    const starts = countStarts(target);
    const killerAt = 3;
    const outcomes = await burst(target, 6, new Map([[killerAt, CRASH_EXIT]]));
    expect(outcomes[killerAt]).toMatchObject({ ok: false, code: KilnErrorCode.WorkerCrashed });
    expect(outcomes.filter((o) => o.ok)).toHaveLength(6);
    await settledWorker(target);
    expect(target.stats().totals.crashes).toBe(1);
    expect(starts()).toBe(2);
  });

  it('fails each of two killers in one batch alone, and no innocent', async () => {
    const target = await pool();
    const killers = new Map([
      [3, CRASH_EXIT],
      [9, CRASH_UNCAUGHT],
    ]);
    const outcomes = await burst(target, 12, killers);
    outcomes.forEach((o, i) => {
      if (killers.has(i))
        expect(o, `killer ${i}`).toMatchObject({ ok: false, code: 'WORKER_CRASHED' });
      else expect(o, `request ${i}`).toEqual({ ok: true, y: [2 * i] });
    });
    await settledWorker(target);
    // The batch, then each killer alone (both may share the first one's batch death).
    expect(target.stats().totals.crashes).toBe(3);
  });

  it('leaves an error the engine throws alone: nothing is retried, no worker dies', async () => {
    const target = await pool();
    const starts = countStarts(target);
    const failAt = 5;
    const outcomes = await burst(target, 12, new Map([[failAt, FAIL_FORWARD]]));
    expect(outcomes[failAt]).toMatchObject({ ok: false, code: KilnErrorCode.EngineError });
    expect(outcomes.filter((o) => o.ok)).toHaveLength(12);
    expect(target.stats().totals.crashes).toBe(0);
    expect(starts()).toBe(1);
  });
});
