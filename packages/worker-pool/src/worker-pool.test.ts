import { ManualClock } from '@kiln/batching';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import type { JobMetrics } from './pool-events.js';
import type { WorkerPoolSettingsInput } from './settings.js';
import { GatedModel, RowTranslator } from './test-fixtures/gated-model.js';
import type { WorkerPool } from './worker-pool.js';

const pools: { pool: WorkerPool<number[], number[]>; clock: ManualClock }[] = [];
afterEach(async () => {
  for (const { pool, clock } of pools.splice(0)) {
    const done = pool.shutdown({ drain: false, timeoutMs: 0 });
    clock.advance(0);
    await done;
  }
});

/** Lets pending callbacks and a macrotask turn run. */
async function flush(times = 3): Promise<void> {
  for (let i = 0; i < times; i++) await new Promise((resolve) => setImmediate(resolve));
}

async function inlinePool(settings: WorkerPoolSettingsInput, model = new GatedModel()) {
  const clock = new ManualClock();
  const pool = await createWorkerPool({
    model: { shared: model, translator: new RowTranslator() },
    settings: { cores: 2, maxBatchDelayMs: 0, ...settings },
    clock,
  });
  pools.push({ pool, clock });
  return { pool, model, clock };
}

/** The code a settled promise failed with, or 'ok'. */
async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    return error instanceof KilnError ? error.code : `not a KilnError: ${String(error)}`;
  }
}

function workersOf(pool: WorkerPool<number[], number[]>): number {
  const { workers } = pool.stats();
  return workers.starting + workers.idle + workers.busy + workers.stopping;
}

describe('batch aggregation', () => {
  it('takes up to batch_size at once and waits max_batch_delay for more on the clock', async () => {
    const { pool, model, clock } = await inlinePool({
      batchSize: 4,
      maxBatchDelayMs: 50,
      maxWorkers: 1,
    });
    model.open = true;
    const first = [1, 2, 3].map((v) => pool.predict([v]));
    await flush();
    clock.advance(49);
    await flush();
    expect(model.forwards).toEqual([]);
    clock.advance(1);
    expect(await Promise.all(first)).toEqual([[2], [4], [6]]);
    expect(model.forwards).toEqual([3]);

    const second = [1, 2, 3, 4, 5].map((v) => pool.predict([v]));
    await flush();
    expect(model.forwards).toEqual([3, 4]); // a full batch does not wait
    clock.advance(50);
    expect(await Promise.all(second)).toEqual([[2], [4], [6], [8], [10]]);
    expect(model.forwards).toEqual([3, 4, 1]);
  });
});

describe('bucketing', () => {
  it('batches only requests of one bucket together when bucketOf is given', async () => {
    const clock = new ManualClock();
    const model = new GatedModel();
    model.open = true;
    const pool = await createWorkerPool({
      model: { shared: model, translator: new RowTranslator() },
      settings: { cores: 2, batchSize: 4, maxBatchDelayMs: 10, maxWorkers: 1 },
      clock,
      bucketOf: (row) => row.length,
    });
    pools.push({ pool, clock });
    const forwards: number[] = [];
    pool.on('batch', (b) => forwards.push(b.forwards));
    const rows = [[1], [1, 2], [3], [4, 5], [6], [7, 8]];
    const results = rows.map((row) => pool.predict(row));
    await flush();
    clock.advance(10);
    await flush();
    clock.advance(10);
    expect(await Promise.all(results)).toEqual(rows.map((row) => row.map((v) => 2 * v)));
    expect(forwards).toEqual([1, 1]); // one bucket per batch: each batch stacks into one forward
    expect(model.forwards).toEqual([3, 3]);
  });
});

describe('scaling', () => {
  it('adds a worker only while the queue holds more than 2 × batch_size, up to maxWorkers', async () => {
    const { pool, model } = await inlinePool({ batchSize: 2, minWorkers: 1, maxWorkers: 3 });
    const results = [pool.predict([0])];
    await flush();
    expect(model.pending).toBe(1); // the one worker is busy
    for (let i = 1; i <= 4; i++) results.push(pool.predict([i]));
    await flush();
    expect(pool.stats().queueDepth).toBe(4);
    expect(workersOf(pool)).toBe(1); // 4 is not more than 2 × 2

    results.push(pool.predict([5]));
    await flush();
    expect(workersOf(pool)).toBe(2);
    expect(model.pending).toBe(2); // the new worker took a batch of 2
    expect(pool.stats().queueDepth).toBe(3);

    for (let i = 6; i <= 15; i++) results.push(pool.predict([i]));
    await flush();
    expect(workersOf(pool)).toBe(3);
    expect(pool.stats().queueDepth).toBeGreaterThan(4); // deep, yet at maxWorkers
    model.open = true;
    model.release(true);
    expect(await Promise.all(results)).toEqual(Array.from({ length: 16 }, (_, i) => [2 * i]));
  });

  it('retires workers above minWorkers after max_idle_time, not before', async () => {
    const { pool, model, clock } = await inlinePool({
      batchSize: 1,
      minWorkers: 1,
      maxWorkers: 3,
      maxIdleTimeS: 60,
    });
    const results = Array.from({ length: 8 }, (_, i) => pool.predict([i]));
    await flush(6);
    expect(workersOf(pool)).toBe(3);
    model.open = true;
    model.release(true);
    await Promise.all(results);
    await flush();
    clock.advance(59_999);
    await flush();
    expect(workersOf(pool)).toBe(3);
    clock.advance(1);
    await flush();
    expect(workersOf(pool)).toBe(1);
    clock.advance(600_000);
    await flush();
    expect(workersOf(pool)).toBe(1); // minWorkers stays
  });

  it('scales to zero and back without losing a job', async () => {
    const { pool, model, clock } = await inlinePool({
      minWorkers: 0,
      maxWorkers: 1,
      maxIdleTimeS: 1,
    });
    model.open = true;
    expect(workersOf(pool)).toBe(0);
    expect(pool.describe().status).toBe('Healthy');
    expect(await pool.predict([3])).toEqual([6]);
    await flush();
    clock.advance(1000);
    await flush();
    expect(workersOf(pool)).toBe(0);
    const again = [pool.predict([4]), pool.predict([5])];
    expect(await Promise.all(again)).toEqual([[8], [10]]);
  });

  it('scale to maxWorkers 0 drains what was accepted, refuses new work, and scales back', async () => {
    const { pool, model } = await inlinePool({ batchSize: 1, maxWorkers: 1 });
    const accepted = [pool.predict([1]), pool.predict([2]), pool.predict([3])];
    await flush();
    const scaled = pool.scale({ minWorkers: 0, maxWorkers: 0 });
    expect(await outcome(pool.predict([9]))).toBe(KilnErrorCode.ModelNotReady);
    model.open = true;
    model.release(true);
    await scaled;
    expect(await Promise.all(accepted)).toEqual([[2], [4], [6]]);
    await flush();
    expect(workersOf(pool)).toBe(0);
    await pool.scale({ minWorkers: 1, maxWorkers: 1 });
    expect(workersOf(pool)).toBe(1);
    expect(await pool.predict([7])).toEqual([14]);
  });

  it('lets every leaving worker go once the queue they drain is empty', async () => {
    const { pool, model, clock } = await inlinePool({
      batchSize: 2,
      maxBatchDelayMs: 10,
      minWorkers: 2,
      maxWorkers: 2,
    });
    const accepted = Array.from({ length: 5 }, (_, i) => pool.predict([i]));
    await flush();
    expect(model.pending).toBe(2);
    await pool.scale({ minWorkers: 0, maxWorkers: 0 });
    model.open = true;
    model.release(true);
    // One leaving worker gathers the last job for max_batch_delay while the other, which saw
    // it queued, waits: once the queue is empty it must leave rather than wait on.
    for (let i = 0; i < 5; i++) {
      await flush();
      clock.advance(10);
    }
    expect(await Promise.all(accepted)).toEqual([[0], [2], [4], [6], [8]]);
    await flush();
    expect(workersOf(pool)).toBe(0);
  });

  it('rejects limits that make no sense', async () => {
    const { pool } = await inlinePool({});
    await expect(pool.scale({ minWorkers: 3, maxWorkers: 2 })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
    await expect(pool.scale({ maxWorkers: -1 })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
    await expect(pool.scale({ maxWorkers: 2, device: 'gpu3' })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
  });
});

describe('deadlines and cancellation', () => {
  it('times out jobs in the queue and while running, and aborts a run nobody waits for', async () => {
    const { pool, model, clock } = await inlinePool({ batchSize: 1, maxWorkers: 1 });
    const running = pool.predict([1], { timeoutMs: 100 });
    await flush();
    const queued = pool.predict([2], { timeoutMs: 50 });
    const patient = pool.predict([3]);
    clock.advance(50);
    expect(await outcome(queued)).toBe(KilnErrorCode.Timeout);
    expect(model.pending).toBe(1);
    clock.advance(50);
    expect(await outcome(running)).toBe(KilnErrorCode.Timeout);
    await flush();
    // The timed-out run was aborted, so the next job runs without anyone releasing the gate.
    expect(model.forwards).toEqual([1, 1]);
    model.release();
    expect(await patient).toEqual([6]);
    expect(pool.stats().totals.expired).toBe(2);
  });

  it('cancels queued jobs before they run and running jobs at once', async () => {
    const { pool, model } = await inlinePool({ batchSize: 1, maxWorkers: 1 });
    const running = pool.submit([1]);
    await flush();
    const queued = pool.submit([2]);
    queued.cancel('changed my mind');
    expect(await outcome(queued.result)).toBe(KilnErrorCode.Cancelled);
    running.cancel();
    expect(await outcome(running.result)).toBe(KilnErrorCode.Cancelled);
    await flush();
    expect(model.forwards).toEqual([1]); // the queued job never ran
    const controller = new AbortController();
    const viaSignal = pool.predict([5], { signal: controller.signal });
    await flush();
    controller.abort();
    expect(await outcome(viaSignal)).toBe(KilnErrorCode.Cancelled);
  });

  it('answers QUEUE_FULL at once when job_queue_size jobs wait', async () => {
    const { pool } = await inlinePool({ batchSize: 1, maxWorkers: 1, jobQueueSize: 2 });
    pool.predict([1]).catch(() => undefined);
    await flush();
    pool.predict([2]).catch(() => undefined);
    pool.predict([3]).catch(() => undefined);
    expect(await outcome(pool.predict([4]))).toBe(KilnErrorCode.QueueFull);
  });
});

describe('failures', () => {
  it('replaces a worker whose engine failed as a whole and runs its batch again, each request alone', async () => {
    const { pool, model, clock } = await inlinePool({
      batchSize: 2,
      maxBatchDelayMs: 10,
      maxWorkers: 1,
    });
    model.open = true;
    const before = pool.describe().workerGroups[0]!.workers[0]!.id;
    // The batched forward and the predictor's one-by-one retries all meet a dead engine.
    model.crashNext = 3;
    const batch = [pool.predict([1]), pool.predict([2])];
    clock.advance(10);
    expect(await Promise.all(batch)).toEqual([[2], [4]]);
    // Rows per forward: the batch, the predictor's retries, then each request on the new worker.
    expect(model.forwards).toEqual([2, 1, 1, 1, 1]);
    const after = pool.describe().workerGroups[0]!.workers[0]!.id;
    expect(after).not.toBe(before);
    expect(pool.stats().totals).toMatchObject({ crashes: 1, succeeded: 2, failed: 0 });
  });

  it('answers a request whose worker fails as a whole while it runs alone with the crash', async () => {
    const { pool, model, clock } = await inlinePool({
      batchSize: 2,
      maxBatchDelayMs: 10,
      maxWorkers: 1,
    });
    model.open = true;
    // The batch's three forwards fail, then the first request's own run alone.
    model.crashNext = 4;
    const batch = [pool.predict([1]), pool.predict([2])];
    clock.advance(10);
    expect(await Promise.all(batch.map(outcome))).toEqual([KilnErrorCode.WorkerCrashed, 'ok']);
    expect(pool.stats().totals).toMatchObject({ crashes: 2, succeeded: 1, failed: 1 });
    await flush();
    const third = pool.predict([3]);
    await flush();
    clock.advance(10);
    expect(await third).toEqual([6]);
  });

  it('fails a single bad input alone', async () => {
    const { pool, model } = await inlinePool({ batchSize: 3, maxBatchDelayMs: 10, maxWorkers: 1 });
    model.open = true;
    const results = [pool.predict([1]), pool.predict([]), pool.predict([3])];
    expect(await Promise.all(results.map(outcome))).toEqual([
      'ok',
      KilnErrorCode.InvalidInput,
      'ok',
    ]);
  });

  it('rejects creation when no worker can start', async () => {
    const model = new GatedModel();
    model.refuseContexts = 'out of memory';
    await expect(
      createWorkerPool({
        model: { shared: model, translator: new RowTranslator() },
        settings: { minWorkers: 1 },
      }),
    ).rejects.toMatchObject({ message: expect.stringMatching(/out of memory/) });
  });

  it('fails waiting jobs when no worker can start, then backs off before trying again', async () => {
    const { pool, model, clock } = await inlinePool({ minWorkers: 0, maxWorkers: 1 });
    model.refuseContexts = 'no device';
    await expect(pool.predict([1])).rejects.toThrow(
      /no worker of model gated could start: no device/,
    );
    expect(pool.describe().status).toBe('FAILED');
    expect(await outcome(pool.predict([2]))).toBe(KilnErrorCode.EngineError);
    expect(pool.stats().totals.startFailures).toBe(1); // refused fast, no second attempt
    model.refuseContexts = undefined;
    model.open = true;
    clock.advance(1000);
    expect(await pool.predict([3])).toEqual([6]);
    expect(pool.describe().status).toBe('Healthy');
  });
});

describe('shutdown', () => {
  it('drains every accepted job, then refuses with CLOSED', async () => {
    const { pool, model } = await inlinePool({ batchSize: 2, maxWorkers: 2 });
    const accepted = Array.from({ length: 7 }, (_, i) => pool.predict([i]));
    await flush();
    const done = pool.shutdown();
    expect(await outcome(pool.predict([1]))).toBe(KilnErrorCode.Closed);
    model.open = true;
    model.release(true);
    await done;
    expect(await Promise.all(accepted)).toEqual(Array.from({ length: 7 }, (_, i) => [2 * i]));
    expect(workersOf(pool)).toBe(0);
    expect(pool.describe().status).toBe('Unhealthy');
  });

  it('without drain fails queued jobs and lets the batch in flight finish', async () => {
    const { pool, model } = await inlinePool({ batchSize: 1, maxWorkers: 1 });
    const running = pool.predict([1]);
    await flush();
    const queued = pool.predict([2]);
    const done = pool.shutdown({ drain: false });
    expect(await outcome(queued)).toBe(KilnErrorCode.Closed);
    model.release();
    expect(await running).toEqual([2]);
    await done;
  });

  it('past its timeout stops workers and fails what they held', async () => {
    const { pool, clock } = await inlinePool({ batchSize: 1, maxWorkers: 1 });
    const stuck = pool.predict([1]);
    await flush();
    const done = pool.shutdown({ timeoutMs: 100 });
    clock.advance(100);
    expect(await outcome(stuck)).toBe(KilnErrorCode.Closed);
    await done;
    expect(workersOf(pool)).toBe(0);
  });
});

describe('measurements', () => {
  it('reports queue time, batch size and stage times per job, and workers per state', async () => {
    const { pool, model, clock } = await inlinePool({ batchSize: 2, maxWorkers: 1 });
    const jobs: JobMetrics[] = [];
    const states: string[] = [];
    pool.on('job', (m) => jobs.push(m));
    pool.on('worker', (w) => states.push(w.state));
    const first = pool.predict([1]);
    await flush();
    const later = [pool.predict([2]), pool.predict([3])];
    clock.advance(30);
    expect(pool.stats()).toMatchObject({ queueDepth: 2, workers: { busy: 1 } });
    model.open = true;
    model.release();
    await Promise.all([first, ...later]);
    expect(jobs.map((j) => [j.queueMs, j.batchSize, j.ok])).toEqual([
      [0, 1, true],
      [30, 2, true],
      [30, 2, true],
    ]);
    for (const j of jobs) {
      expect(j.inferenceMs).toBeGreaterThanOrEqual(0);
      expect(j.preprocessMs).toBeGreaterThanOrEqual(0);
      expect(j.postprocessMs).toBeGreaterThanOrEqual(0);
    }
    expect(states).toContain('busy');
    expect(pool.stats().totals).toMatchObject({ accepted: 3, succeeded: 3, batches: 2 });
  });

  it('describes settings, queue, status and worker groups like DJL', async () => {
    const { pool } = await inlinePool({
      batchSize: 8,
      maxBatchDelayMs: 100,
      jobQueueSize: 50,
      minWorkers: 2,
      maxWorkers: 2,
    });
    const description = pool.describe();
    expect(description).toMatchObject({
      name: 'gated',
      batchSize: 8,
      maxBatchDelayMs: 100,
      queueSize: 50,
      queued: 0,
      status: 'Healthy',
      workerGroups: [{ device: 'cpu', minWorkers: 2, maxWorkers: 2 }],
    });
    const workers = description.workerGroups[0]!.workers;
    expect(workers).toHaveLength(2);
    for (const w of workers) {
      expect(w).toMatchObject({ status: 'idle', kind: 'inline' });
      expect(Date.parse(w.startTime)).not.toBeNaN();
    }
  });
});

describe('thread budget', () => {
  it('splits the cores between workers unless the user chose the threads', async () => {
    const budget = await inlinePool({ cores: 8, minWorkers: 2, maxWorkers: 4 });
    expect(budget.model.contextThreads).toEqual([2, 2]);
    const chosen = await inlinePool({ cores: 8, minWorkers: 1, maxWorkers: 4, threads: 3 });
    expect(chosen.model.contextThreads).toEqual([3]);
    const user = await inlinePool(
      { cores: 8, minWorkers: 1, maxWorkers: 4 },
      new GatedModel({ 'option.intraOpNumThreads': '6' }),
    );
    expect(user.model.contextThreads).toEqual([undefined]);
  });
});
