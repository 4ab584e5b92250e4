import { rm } from 'node:fs/promises';
import os from 'node:os';
import { threadId } from 'node:worker_threads';
import {
  CPU,
  KilnError,
  KilnErrorCode,
  NDList,
  type ServingInput,
  type ServingOutput,
  Tensor,
  servingPropertiesFrom,
} from '@kiln/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { allowedCores } from './cpu-pinning.js';
import { createWorkerPool } from './create-worker-pool.js';
import type { WorkerPoolSettingsInput } from './settings.js';
import { RowTranslator } from './test-fixtures/gated-model.js';
import { vectorBody } from './test-fixtures/json-translator.js';
import {
  CRASH_EXIT,
  CRASH_UNCAUGHT,
  FAIL_FORWARD,
  HANG_FOREVER,
  WAIT_FOR_ABORT,
  provider,
} from './test-fixtures/scale-engine.js';
import {
  JSON_TRANSLATOR_MODULE,
  SCALE_ENGINE_MODULE,
  writeScaleModel,
} from './test-fixtures/scale-model-folder.js';
import type { WorkerPool } from './worker-pool.js';

const dirs: string[] = [];
const pools: WorkerPool<ServingInput, ServingOutput>[] = [];
let modelDir: string;

beforeAll(async () => {
  modelDir = await writeScaleModel(2);
  dirs.push(modelDir);
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.shutdown({ timeoutMs: 5000 })));
});
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** `translator`: a translator module, or null for the one the model's serving.properties picks. */
async function threadPool(
  settings: WorkerPoolSettingsInput,
  dir = modelDir,
  translator: string | null = JSON_TRANSLATOR_MODULE,
) {
  const pool = await createWorkerPool({
    model: { url: dir, engines: [SCALE_ENGINE_MODULE], ...(translator ? { translator } : {}) },
    // These tests are about thread workers: a fast model must not move inline (placement auto).
    settings: { cores: 2, maxBatchDelayMs: 20, placement: 'thread', ...settings },
  });
  pools.push(pool);
  return pool;
}

/**
 * The share of time the event loop was busy while `work` ran (event-loop utilization): time a
 * busy host keeps the thread off the CPU while it waits for events does not count.
 */
async function loopBusyWhile(work: () => Promise<unknown>): Promise<number> {
  const before = performance.eventLoopUtilization();
  await work();
  return performance.eventLoopUtilization(before).utilization;
}

function y(output: ServingOutput): number[] {
  if (output.type !== 'json') throw new Error('expected a JSON output');
  return (output.value as { y: number[] }).y;
}

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'ok';
  } catch (error) {
    return error instanceof KilnError ? error.code : `not a KilnError: ${String(error)}`;
  }
}

describe('thread workers', () => {
  it('serve each request on worker threads with the thread budget applied', async () => {
    const pool = await threadPool({ cores: 4, minWorkers: 2, maxWorkers: 2, batchSize: 4 });
    const outputs = await Promise.all(
      Array.from({ length: 12 }, (_, i) => pool.predict(vectorBody([i + 1, -i - 1, 0.5]))),
    );
    outputs.forEach((output, i) => expect(y(output)).toEqual([2 * i + 2, -2 * i - 2, 1]));
    const workers = pool.describe().workerGroups[0]!.workers;
    expect(workers).toHaveLength(2);
    const threads = workers.map((w) => w.threadId);
    expect(new Set(threads).size).toBe(2);
    expect(threads).not.toContain(threadId);
    for (const w of workers)
      expect(w).toMatchObject({ kind: 'thread', status: 'idle', intraOpThreads: 2 });
  });

  it("serve tensors through the model's own translator", async () => {
    const pool = await threadPool({ maxWorkers: 1 }, modelDir, null);
    const x = new Tensor('float32', new Float32Array([1, 2, 3]), [1, 3], 'x');
    const output = await pool.predict({ tensors: NDList.of(x) });
    expect(output.type).toBe('tensors');
    if (output.type === 'tensors') expect(output.tensors.get(0).toNested()).toEqual([[2, 4, 6]]);
  });

  it('fail a bad input or an input the engine refuses alone', async () => {
    const pool = await threadPool({ maxWorkers: 1, batchSize: 4, maxBatchDelayMs: 50 });
    const results = [
      pool.predict(vectorBody([1])),
      pool.predict({ body: new TextEncoder().encode('not json') }),
      pool.predict(vectorBody([FAIL_FORWARD])),
      pool.predict(vectorBody([4])),
    ];
    expect(await Promise.all(results.map(outcome))).toEqual([
      'ok',
      KilnErrorCode.InvalidInput,
      KilnErrorCode.EngineError,
      'ok',
    ]);
  });

  for (const [how, trigger] of [
    ['exits', CRASH_EXIT],
    ['throws an uncaught error', CRASH_UNCAUGHT],
  ] as const) {
    it(`fail only the request whose thread ${how}, replace it, and serve on`, async () => {
      const pool = await threadPool({
        minWorkers: 1,
        maxWorkers: 1,
        batchSize: 2,
        maxBatchDelayMs: 200,
      });
      const before = pool.describe().workerGroups[0]!.workers[0]!.id;
      const [innocent, killer] = [
        pool.predict(vectorBody([1])),
        pool.predict(vectorBody([trigger])),
      ];
      // The batch's worker died: each request ran again alone, and only the killer failed.
      expect(y(await innocent)).toEqual([2]);
      const error = await killer.catch((e: unknown) => e as KilnError);
      expect(error).toMatchObject({ code: KilnErrorCode.WorkerCrashed });
      expect((error as KilnError).message).toMatch(/crashed/);
      expect(y(await pool.predict(vectorBody([5])))).toEqual([10]);
      const after = pool.describe().workerGroups[0]!.workers;
      expect(after).toHaveLength(1);
      expect(after[0]!.id).not.toBe(before);
      // Once in the batch, once alone.
      expect(pool.stats().totals.crashes).toBe(2);
    });
  }

  it('end and replace a thread stuck in its engine once nobody waits for its batch', async () => {
    const pool = await threadPool({
      minWorkers: 1,
      maxWorkers: 1,
      batchSize: 1,
      maxBatchDelayMs: 0,
      hungRunTimeoutMs: 300,
    });
    const before = pool.describe().workerGroups[0]!.workers[0]!.id;
    expect(await outcome(pool.predict(vectorBody([HANG_FOREVER]), { timeoutMs: 200 }))).toBe(
      KilnErrorCode.Timeout,
    );
    // Queued behind the stuck run; served once the replacement is up.
    expect(y(await pool.predict(vectorBody([4])))).toEqual([8]);
    const after = pool.describe().workerGroups[0]!.workers;
    expect(after.map((w) => w.id)).not.toContain(before);
    expect(pool.stats().totals.crashes).toBe(1);
    expect(pool.describe().workerGroups[0]!.lastError).toMatch(/still running 300 ms after/);
  });

  it('abort a running batch on its thread once nobody waits for it, run after run', async () => {
    const pool = await threadPool({ minWorkers: 1, maxWorkers: 1, batchSize: 1 });
    for (let run = 0; run < 3; run++) {
      // The engine ends only when its run's signal aborts: a timeout that did not reach the
      // thread would leave this run hanging and every later request behind it.
      expect(await outcome(pool.predict(vectorBody([WAIT_FOR_ABORT]), { timeoutMs: 100 }))).toBe(
        KilnErrorCode.Timeout,
      );
      expect(y(await pool.predict(vectorBody([run])))).toEqual([2 * run]);
    }
    expect(pool.stats().totals.crashes).toBe(0);
  });

  it('keep the event loop free while a synchronous engine runs, unlike running it inline', async () => {
    const busyMs = 100;
    const dir = await writeScaleModel(2, { 'option.busyMs': String(busyMs) });
    dirs.push(dir);
    const settings = { minWorkers: 2, maxWorkers: 2, batchSize: 1, maxBatchDelayMs: 0 };
    const threads = await threadPool(settings, dir);
    const threaded = await loopBusyWhile(() =>
      Promise.all(Array.from({ length: 6 }, (_, i) => threads.predict(vectorBody([i])))),
    );
    const model = await (
      await provider.load()
    ).loadModel({
      name: 'scale',
      modelDir: dir,
      device: CPU,
      options: { busyMs: String(busyMs) },
      properties: servingPropertiesFrom({}),
    });
    const inline = await createWorkerPool({
      model: { shared: model, translator: new RowTranslator() },
      settings,
    });
    try {
      const blocked = await loopBusyWhile(() =>
        Promise.all(Array.from({ length: 6 }, (_, i) => inline.predict([i]))),
      );
      // Inline, the spin holds the event loop nearly all the time; on worker threads the main
      // thread only routes.
      expect(blocked).toBeGreaterThan(0.8);
      expect(threaded).toBeLessThan(blocked / 3);
    } finally {
      await inline.shutdown();
    }
  });

  it('move request bodies when transferInputs is on and copy them otherwise', async () => {
    const moving = await threadPool({ maxWorkers: 1, transferInputs: true });
    const moved = vectorBody([1, 2]);
    const body = moved.body!;
    expect(y(await moving.predict(moved))).toEqual([2, 4]);
    expect(body.byteLength).toBe(0);
    // Sent again, the moved-away body is refused, not lost on the way to the worker.
    await expect(moving.predict(moved)).rejects.toThrow(/could not be sent.*detached/);
    expect(y(await moving.predict(vectorBody([5])))).toEqual([10]);

    const copying = await threadPool({ maxWorkers: 1 });
    const kept = vectorBody([3]);
    expect(y(await copying.predict(kept))).toEqual([6]);
    expect(new TextDecoder().decode(kept.body)).toBe('{"x":[3]}');
  });

  it('adds a worker under adaptive batching while requests wait behind slow batches', async () => {
    const slow = await writeScaleModel(2, { 'option.sleepMs': '25' });
    dirs.push(slow);
    const pool = await threadPool(
      { minWorkers: 1, maxWorkers: 2, autoBatchSize: 8, maxBatchDelayMs: undefined },
      slow,
    );
    const workers = () => pool.describe().workerGroups[0]!.workers.length;
    // Six closed-loop clients: the one worker takes all that waits, so the queue never holds
    // 2 × batch_size (DJL's rule), yet requests keep waiting behind 25 ms batches.
    await Promise.all(
      Array.from({ length: 6 }, async (_, client) => {
        for (let i = 0; i < 12; i++)
          expect(y(await pool.predict(vectorBody([client])))).toEqual([2 * client]);
      }),
    );
    expect(pool.describe().batchSize).toBe(8);
    expect(workers()).toBe(2);
  });

  it('run one worker group per device, all pulling from the one queue', async () => {
    const dir = await writeScaleModel(2, { 'option.sleepMs': '10' });
    dirs.push(dir);
    const pool = await createWorkerPool({
      model: { url: dir, engines: [SCALE_ENGINE_MODULE], translator: JSON_TRANSLATOR_MODULE },
      devices: ['cpu', 'gpu0'],
      settings: {
        cores: 2,
        minWorkers: 1,
        maxWorkers: 1,
        batchSize: 1,
        maxBatchDelayMs: 0,
        placement: 'thread',
      },
    });
    pools.push(pool);
    const devices = new Set<string>();
    pool.on('job', (job) => devices.add(job.device));
    const outputs = await Promise.all(
      Array.from({ length: 12 }, (_, i) => pool.predict(vectorBody([i + 1]))),
    );
    outputs.forEach((output, i) => expect(y(output)).toEqual([2 * i + 2]));
    expect([...devices].sort()).toEqual(['cpu', 'gpu0']);
    expect(
      pool.describe().workerGroups.map((g) => [g.device, g.workers.length, g.maxWorkers]),
    ).toEqual([
      ['cpu', 1, 1],
      ['gpu0', 1, 1],
    ]);
  });

  it('reject creation when the model cannot load', async () => {
    await expect(
      createWorkerPool({
        model: { url: `${modelDir}-missing`, engines: [SCALE_ENGINE_MODULE] },
        settings: { minWorkers: 1 },
      }),
    ).rejects.toBeInstanceOf(KilnError);
  });

  it('answer every accepted job on shutdown', async () => {
    const dir = await writeScaleModel(3, { 'option.sleepMs': '20' });
    dirs.push(dir);
    const pool = await threadPool(
      { minWorkers: 1, maxWorkers: 1, batchSize: 2, maxBatchDelayMs: 0 },
      dir,
    );
    const accepted = Array.from({ length: 10 }, (_, i) => pool.predict(vectorBody([i])));
    await pool.shutdown();
    const outputs = await Promise.all(accepted);
    outputs.forEach((output, i) => expect(y(output)).toEqual([3 * i]));
    expect(await outcome(pool.predict(vectorBody([1])))).toBe(KilnErrorCode.Closed);
  });
});

const pinnable = process.platform === 'linux' && allowedCores().length >= 2;

describe.skipIf(process.platform !== 'linux')('thread priority', () => {
  it('runs thread workers nicer than the main thread, so routing comes first', async () => {
    const pool = await threadPool({ minWorkers: 1, maxWorkers: 1, workerNice: 3 });
    const worker = pool.describe().workerGroups[0]!.workers[0]!;
    expect(worker.niceError).toBeUndefined();
    expect(worker.nice).toBe(Math.min(19, os.getPriority() + 3));
    const plain = await threadPool({ minWorkers: 1, maxWorkers: 1, workerNice: 0 });
    expect(plain.describe().workerGroups[0]!.workers[0]!.nice).toBeUndefined();
  });
});

describe.skipIf(!pinnable)('CPU pinning', () => {
  it('pins each thread worker and its engine to its own cores', async () => {
    const pool = await threadPool({ cores: 2, minWorkers: 2, maxWorkers: 2, pinCores: true });
    const workers = pool.describe().workerGroups[0]!.workers;
    const pinned = workers.map((w) => w.pinnedCores);
    expect(pinned.sort()).toEqual([[0], [1]]);
    // The main thread keeps every core.
    expect(allowedCores().length).toBeGreaterThanOrEqual(2);
  });
});
