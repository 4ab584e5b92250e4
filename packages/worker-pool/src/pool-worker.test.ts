import { JobQueue, ManualClock } from '@kiln/batching';
import type { KilnError } from '@kiln/core';
import { afterEach, describe, expect, it } from 'vitest';
import { type BatchReport, PoolWorker, type PoolWorkerHooks } from './pool-worker.js';
import type { BatchRun, WorkerBackend } from './worker-backend.js';
import type { WorkerFacts } from './worker-protocol.js';

/**
 * A backend whose batches finish when the test says so, as an engine computing on another
 * thread or in another process does. It records, in one log with the answers the pool writes,
 * when each batch was handed over.
 */
class RemoteBackend implements WorkerBackend<number, number> {
  readonly kind = 'inline';
  private readonly finishers: (() => void)[] = [];

  constructor(
    readonly computesElsewhere: boolean,
    private readonly log: string[],
  ) {}

  start(): Promise<WorkerFacts> {
    return Promise.resolve({} as WorkerFacts);
  }

  run(inputs: readonly number[]): Promise<BatchRun<number>> {
    this.log.push(`run ${inputs.join(',')}`);
    return new Promise((resolve) =>
      this.finishers.push(() =>
        resolve({ results: inputs.map((x) => ({ ok: true, value: 2 * x })), timings: undefined }),
      ),
    );
  }

  /** Finishes the oldest batch in flight. */
  finish(): void {
    this.finishers.shift()?.();
  }

  endProfiling(): Promise<unknown> {
    return Promise.resolve(undefined);
  }

  onDeath(): void {}

  stop(): Promise<void> {
    return Promise.resolve();
  }

  terminate(): Promise<void> {
    return Promise.resolve();
  }
}

const workers: PoolWorker<number, number>[] = [];
afterEach(async () => {
  for (const worker of workers.splice(0)) await worker.terminate();
});

async function startWorker(computesElsewhere: boolean, log: string[]) {
  const queue = new JobQueue<number, number>();
  const backend = new RemoteBackend(computesElsewhere, log);
  const batches: BatchReport<number, number>[] = [];
  const hooks: PoolWorkerHooks<number, number> = {
    mayRetire: () => false,
    mustDrain: () => false,
    stateChanged: () => {},
    batchDone: (report) => batches.push(report),
    timedOut: () => {},
    exited: (_worker, _error: KilnError | undefined) => {},
  };
  const worker = new PoolWorker(
    1,
    0,
    'test worker',
    backend,
    queue,
    new ManualClock(),
    {
      batching: { batchSize: 2, maxBatchDelayMs: 0 },
      maxIdleTimeMs: 60_000,
      startTimeoutMs: 60_000,
      hungRunTimeoutMs: 60_000,
    },
    hooks,
  );
  workers.push(worker);
  await worker.start();
  /** Submits inputs; each answer is logged as it arrives. */
  const submit = (...inputs: number[]) =>
    Promise.all(
      inputs.map((x) =>
        queue.submit(x).result.then((y) => {
          log.push(`answer ${y}`);
          return y;
        }),
      ),
    );
  return { queue, backend, batches, submit };
}

/** Lets microtasks and a few event-loop turns run. */
async function flush(times = 3): Promise<void> {
  for (let i = 0; i < times; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('a worker whose engine computes elsewhere', () => {
  it('hands the waiting batch over before it answers the one that finished', async () => {
    const log: string[] = [];
    const { backend, batches, submit } = await startWorker(true, log);
    const first = submit(1);
    await flush();
    const second = submit(2, 3);
    await flush();
    expect(log).toEqual(['run 1']);

    backend.finish();
    await flush();
    expect(log).toEqual(['run 1', 'run 2,3', 'answer 2']);
    expect(await first).toEqual([2]);

    // Nothing waits behind the last batch: its answers are not held back.
    backend.finish();
    expect(await second).toEqual([4, 6]);
    expect(log.slice(3)).toEqual(['answer 4', 'answer 6']);
    expect(batches.map((b) => b.jobs.map((j) => j.answered))).toEqual([[true], [true, true]]);
  });

  it('answers first when its batches compute on the main thread', async () => {
    const log: string[] = [];
    const { backend, submit } = await startWorker(false, log);
    const first = submit(1);
    await flush();
    const second = submit(2, 3);
    await flush();

    backend.finish();
    await flush();
    expect(log).toEqual(['run 1', 'answer 2', 'run 2,3']);
    backend.finish();
    expect(await Promise.all([first, second])).toEqual([[2], [4, 6]]);
  });
});
