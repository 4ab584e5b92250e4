import { JobQueue, ManualClock } from '@kiln/batching';
import { KilnError, KilnErrorCode, type PredictResult } from '@kiln/core';
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
  private readonly runs: {
    inputs: readonly number[];
    resolve(run: BatchRun<number>): void;
    reject(error: KilnError): void;
  }[] = [];

  constructor(
    readonly computesElsewhere: boolean,
    private readonly log: string[],
  ) {}

  start(): Promise<WorkerFacts> {
    return Promise.resolve({} as WorkerFacts);
  }

  run(inputs: readonly number[]): Promise<BatchRun<number>> {
    this.log.push(`run ${inputs.join(',')}`);
    return new Promise((resolve, reject) => this.runs.push({ inputs, resolve, reject }));
  }

  /** Finishes the oldest batch in flight: `2x` each, or the results `results` gives. */
  finish(
    results = (inputs: readonly number[]): PredictResult<number>[] =>
      inputs.map((x) => ({ ok: true, value: 2 * x })),
  ): void {
    const run = this.runs.shift();
    run?.resolve({ results: results(run.inputs), timings: undefined });
  }

  /** Fails the oldest batch in flight as a thread that died would. */
  die(): void {
    this.runs
      .shift()
      ?.reject(new KilnError(KilnErrorCode.WorkerCrashed, 'test worker crashed: exit code 3'));
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
  return { queue, backend, batches, submit, worker };
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

describe('a worker that dies under a batch', () => {
  const crashed = new KilnError(KilnErrorCode.WorkerCrashed, 'engine thread died');

  /** Submits `inputs` so that they run as one batch (behind a first one that finishes). */
  async function batchOf(
    queue: JobQueue<number, number>,
    backend: RemoteBackend,
    ...inputs: number[]
  ) {
    const first = queue.submit(0);
    await flush();
    const handles = inputs.map((x) => queue.submit(x));
    backend.finish();
    await first.result;
    await flush();
    return handles;
  }

  async function outcome(result: Promise<unknown>): Promise<string> {
    return result.then(
      (value) => `ok ${String(value)}`,
      (error: unknown) => (error instanceof KilnError ? error.code : String(error)),
    );
  }

  it('hands the jobs of a batch of several back to the queue, each to run alone', async () => {
    const { queue, backend, batches, worker } = await startWorker(true, []);
    const handles = await batchOf(queue, backend, 1, 2);
    backend.die();
    await worker.exited;
    expect(worker.state).toBe('failed');
    expect(queue.depth).toBe(2);
    expect(batches[1]!.jobs.map((j) => [j.answered, j.retried])).toEqual([
      [false, true],
      [false, true],
    ]);
    const again = await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 });
    expect(again.map((job) => job.input)).toEqual([1]);
    again[0]!.resolve(10);
    expect(await handles[0]!.result).toBe(10);
  });

  it('answers a job that ran alone with the crash', async () => {
    const { queue, backend, batches, worker } = await startWorker(true, []);
    const handle = queue.submit(1);
    await flush();
    backend.die();
    expect(await outcome(handle.result)).toBe(KilnErrorCode.WorkerCrashed);
    await worker.exited;
    expect(queue.depth).toBe(0);
    expect(batches[0]!.jobs.map((j) => [j.answered, j.retried])).toEqual([[true, false]]);
  });

  it('retries only the jobs whose own result says the engine died', async () => {
    const { queue, backend, worker } = await startWorker(true, []);
    const handles = await batchOf(queue, backend, 1, 2);
    backend.finish(() => [
      { ok: true, value: 2 },
      { ok: false, error: crashed },
    ]);
    expect(await outcome(handles[0]!.result)).toBe('ok 2');
    await worker.exited;
    expect(queue.depth).toBe(1);
    expect((await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))[0]!.input).toBe(2);
  });

  it('answers an error the engine threw, which is no death, as it is', async () => {
    const { queue, backend, worker } = await startWorker(true, []);
    const handles = await batchOf(queue, backend, 1, 2);
    const refused = new KilnError(KilnErrorCode.EngineError, 'refused');
    backend.finish(() => [
      { ok: false, error: refused },
      { ok: true, value: 4 },
    ]);
    expect(await Promise.all(handles.map((h) => outcome(h.result)))).toEqual([
      KilnErrorCode.EngineError,
      'ok 4',
    ]);
    expect(worker.state).toBe('idle');
    expect(queue.depth).toBe(0);
  });

  it('fails the batch as before once the queue is closed: no worker may be left to run it', async () => {
    const { queue, backend, worker } = await startWorker(true, []);
    const handles = await batchOf(queue, backend, 1, 2);
    queue.close();
    backend.die();
    expect(await Promise.all(handles.map((h) => outcome(h.result)))).toEqual([
      KilnErrorCode.WorkerCrashed,
      KilnErrorCode.WorkerCrashed,
    ]);
    await worker.exited;
    expect(queue.depth).toBe(0);
  });
});
