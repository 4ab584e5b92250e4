import { KilnError, KilnErrorCode } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import type { Job } from './job.js';
import { JobQueue, type JobQueueOptions } from './job-queue.js';
import { ManualClock } from './manual-clock.js';
import { inspect, rejectionCode } from './test-support/promises.js';

function setup<I = string>(options: Omit<JobQueueOptions<I>, 'clock'> = {}) {
  const clock = new ManualClock();
  const queue = new JobQueue<I, string>({ ...options, clock });
  return { clock, queue };
}

const inputs = (jobs: readonly Job<string, string>[]) => jobs.map((j) => j.input);

describe('JobQueue aggregation', () => {
  it('hands queued jobs out oldest first, up to maxSize at once', async () => {
    const { queue } = setup();
    const handles = ['a', 'b', 'c', 'd', 'e'].map((x) => queue.submit(x));
    expect(queue.depth).toBe(5);

    const first = await queue.takeBatch({ maxSize: 3, maxDelayMs: 50 });
    expect(inputs(first)).toEqual(['a', 'b', 'c']);
    expect(queue.depth).toBe(2);
    for (const job of first) job.resolve(job.input.toUpperCase());
    expect(await Promise.all(handles.slice(0, 3).map((h) => h.result))).toEqual(['A', 'B', 'C']);
    expect(handles.map((h) => h.id)).toEqual([1, 2, 3, 4, 5]);
  });

  it('waits for a first job, then only for what is left of the delay', async () => {
    const { clock, queue } = setup();
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    clock.advance(500);
    expect((await inspect(batch)).state).toBe('pending');

    queue.submit('a'); // taken at t=500: the delay runs until t=600
    clock.advance(60);
    queue.submit('b');
    clock.advance(39);
    expect((await inspect(batch)).state).toBe('pending');
    clock.advance(1);
    expect(inputs(await batch)).toEqual(['a', 'b']);
  });

  it('counts the delay from when the first job was taken, not when it was queued', async () => {
    const { clock, queue } = setup();
    queue.submit('old');
    clock.advance(1000);
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    clock.advance(99);
    expect((await inspect(batch)).state).toBe('pending');
    queue.submit('new');
    clock.advance(1);
    expect(inputs(await batch)).toEqual(['old', 'new']);
  });

  it('returns as soon as maxSize jobs are held', async () => {
    const { clock, queue } = setup();
    const batch = queue.takeBatch({ maxSize: 3, maxDelayMs: 1000 });
    queue.submit('a');
    clock.advance(10);
    queue.submit('b');
    queue.submit('c');
    queue.submit('d');
    expect(inputs(await batch)).toEqual(['a', 'b', 'c']);
    expect(queue.depth).toBe(1);
  });

  it('with maxDelayMs 0 returns what is queued without waiting', async () => {
    const { queue } = setup();
    queue.submit('a');
    queue.submit('b');
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))).toEqual(['a', 'b']);
  });

  it('rejects bad takeBatch options with INVALID_CONFIG', async () => {
    const { queue } = setup();
    expect(await rejectionCode(queue.takeBatch({ maxSize: 0, maxDelayMs: 1 }))).toBe(
      KilnErrorCode.InvalidConfig,
    );
    expect(await rejectionCode(queue.takeBatch({ maxSize: 1.5, maxDelayMs: 1 }))).toBe(
      KilnErrorCode.InvalidConfig,
    );
    expect(await rejectionCode(queue.takeBatch({ maxSize: 1, maxDelayMs: -1 }))).toBe(
      KilnErrorCode.InvalidConfig,
    );
    expect(await rejectionCode(queue.takeBatch({ maxSize: 1, maxDelayMs: Infinity }))).toBe(
      KilnErrorCode.InvalidConfig,
    );
  });
});

describe('JobQueue takeBatch signal', () => {
  it('resolves [] when aborted before a job arrived, and the job goes to the next consumer', async () => {
    const { queue } = setup();
    const controller = new AbortController();
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 10, signal: controller.signal });
    controller.abort();
    expect(await batch).toEqual([]);
    expect(queue.waiting).toBe(0);
    queue.submit('a');
    expect(inputs(await queue.takeBatch({ maxSize: 4, maxDelayMs: 0 }))).toEqual(['a']);
  });

  it('resolves [] at once for an already aborted signal, taking nothing', async () => {
    const { queue } = setup();
    queue.submit('a');
    expect(
      await queue.takeBatch({ maxSize: 4, maxDelayMs: 0, signal: AbortSignal.abort() }),
    ).toEqual([]);
    expect(queue.depth).toBe(1);
  });

  it('listens to the signal only while it waits: a batch handed over at once adds no listener', async () => {
    const { queue } = setup();
    const controller = new AbortController();
    const signal = controller.signal;
    let added = 0;
    const add = signal.addEventListener.bind(signal);
    signal.addEventListener = (...args: Parameters<typeof add>) => (added++, add(...args));
    queue.submit('a');
    expect(inputs(await queue.takeBatch({ maxSize: 1, maxDelayMs: 5, signal }))).toEqual(['a']);
    queue.submit('b');
    expect(inputs(await queue.takeBatch({ maxSize: 4, maxDelayMs: 0, signal }))).toEqual(['b']);
    expect(added).toBe(0);
    // Waiting for a first job, and gathering up to the delay, it still ends on abort.
    const waiting = queue.takeBatch({ maxSize: 4, maxDelayMs: 5, signal });
    queue.submit('c');
    expect(added).toBe(1);
    controller.abort();
    expect(inputs(await waiting)).toEqual(['c']);
  });

  it('returns the jobs held so far when aborted while gathering', async () => {
    const { queue } = setup();
    const controller = new AbortController();
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 1000, signal: controller.signal });
    queue.submit('a');
    controller.abort();
    expect(inputs(await batch)).toEqual(['a']);
    expect(queue.depth).toBe(0);
  });
});

describe('JobQueue capacity', () => {
  it('rejects a submit to a full queue at once with QUEUE_FULL and never queues it', async () => {
    const { queue } = setup({ capacity: 2 });
    const rejected: (string | undefined)[] = [];
    queue.on('rejected', (job, error) => rejected.push(`${job.input}:${error?.code}`));
    queue.submit('a');
    queue.submit('b');
    const full = queue.submit('c');
    expect(rejected).toEqual(['c:QUEUE_FULL']); // synchronously, before any timer or tick
    expect(queue.depth).toBe(2);
    expect(await rejectionCode(full.result)).toBe(KilnErrorCode.QueueFull);
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))).toEqual(['a', 'b']);
    expect(
      inputs(await (queue.submit('d'), queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))),
    ).toEqual(['d']);
  });

  it('counts jobs held by a gathering consumer against the capacity', async () => {
    const { queue } = setup({ capacity: 1 });
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    queue.submit('a');
    expect(queue.depth).toBe(1);
    expect(await rejectionCode(queue.submit('b').result)).toBe(KilnErrorCode.QueueFull);
    queue.close();
    expect(inputs(await batch)).toEqual(['a']);
  });

  it('refuses an invalid capacity', () => {
    expect(() => new JobQueue({ capacity: 0 })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
    expect(() => new JobQueue({ defaultTimeoutMs: -5 })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG' }),
    );
  });
});

describe('JobQueue deadlines', () => {
  it('fails a queued job with TIMEOUT when its deadline passes, by timer', async () => {
    const { clock, queue } = setup();
    const expired: string[] = [];
    queue.on('expired', (job) => expired.push(job.input));
    const slow = queue.submit('a', { timeoutMs: 50 });
    queue.submit('b');
    clock.advance(49);
    expect((await inspect(slow.result)).state).toBe('pending');
    clock.advance(1);
    expect(await rejectionCode(slow.result)).toBe(KilnErrorCode.Timeout);
    expect(expired).toEqual(['a']);
    expect(queue.depth).toBe(1);
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))).toEqual(['b']);
  });

  it('applies defaultTimeoutMs and sets deadline from the queue clock', async () => {
    const { clock, queue } = setup({ defaultTimeoutMs: 30 });
    clock.advance(100);
    const handle = queue.submit('a');
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    expect(job!.enqueuedAt).toBe(100);
    expect(job!.deadline).toBe(130);
    job!.resolve('done');
    expect(await handle.result).toBe('done');
  });

  it('drops a job that expires while a consumer gathers, and the consumer waits on', async () => {
    const { clock, queue } = setup();
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    const doomed = queue.submit('a', { timeoutMs: 20 });
    clock.advance(20);
    expect(await rejectionCode(doomed.result)).toBe(KilnErrorCode.Timeout);
    expect((await inspect(batch)).state).toBe('pending');
    expect(queue.waiting).toBe(1);
    queue.submit('b');
    clock.advance(100);
    expect(inputs(await batch)).toEqual(['b']);
  });

  it('leaves a taken job to the worker: no TIMEOUT from the queue after take', async () => {
    const { clock, queue } = setup();
    const handle = queue.submit('a', { timeoutMs: 10 });
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    clock.advance(50);
    expect(clock.pending).toBe(0);
    expect(clock.now()).toBeGreaterThan(job!.deadline!);
    job!.resolve('late but answered');
    expect(await handle.result).toBe('late but answered');
  });

  it('refuses a non-positive timeout with INVALID_INPUT and treats Infinity as none', async () => {
    const { queue } = setup();
    expect(await rejectionCode(queue.submit('a', { timeoutMs: 0 }).result)).toBe(
      KilnErrorCode.InvalidInput,
    );
    expect(await rejectionCode(queue.submit('a', { timeoutMs: Number.NaN }).result)).toBe(
      KilnErrorCode.InvalidInput,
    );
    queue.submit('b', { timeoutMs: Infinity });
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    expect(job!.deadline).toBeUndefined();
  });
});

describe('JobQueue cancellation', () => {
  it('fails a submit with an aborted signal at once, unqueued', async () => {
    const { queue } = setup();
    const reason = new KilnError(KilnErrorCode.Cancelled, 'client went away');
    const handle = queue.submit('a', { signal: AbortSignal.abort(reason) });
    expect(queue.depth).toBe(0);
    const result = await inspect(handle.result);
    expect(result).toEqual({ state: 'rejected', error: reason });
  });

  it('removes a queued job on handle.cancel and on signal abort, failing it with CANCELLED', async () => {
    const { queue } = setup();
    const cancelled: string[] = [];
    queue.on('cancelled', (job, error) => cancelled.push(`${job.input}:${error?.message}`));
    const controller = new AbortController();
    const a = queue.submit('a');
    const b = queue.submit('b', { signal: controller.signal });
    queue.submit('c');
    a.cancel('changed my mind');
    controller.abort(new Error('socket closed'));
    expect(queue.depth).toBe(1);
    expect(await Promise.all([rejectionCode(a.result), rejectionCode(b.result)])).toEqual([
      KilnErrorCode.Cancelled,
      KilnErrorCode.Cancelled,
    ]);
    expect(cancelled).toEqual(['a:changed my mind', 'b:request was cancelled: socket closed']);
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))).toEqual(['c']);
  });

  it('removes a job cancelled while a consumer gathers it', async () => {
    const { clock, queue } = setup();
    const batch = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    const a = queue.submit('a');
    queue.submit('b');
    a.cancel();
    expect(await rejectionCode(a.result)).toBe(KilnErrorCode.Cancelled);
    clock.advance(100);
    expect(inputs(await batch)).toEqual(['b']);
  });

  it('answers the caller at once when a taken job is cancelled, and aborts the job signal', async () => {
    const { queue } = setup();
    const handle = queue.submit('a');
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    expect(job!.signal!.aborted).toBe(false);
    handle.cancel();
    expect(job!.signal!.aborted).toBe(true);
    expect(job!.settled).toBe(true);
    expect(await rejectionCode(handle.result)).toBe(KilnErrorCode.Cancelled);
    job!.resolve('too late'); // ignored: first settle wins
  });

  it('tells onCancel listeners once, and gives an aborted signal when asked after cancel', async () => {
    const { queue } = setup();
    const handle = queue.submit('a');
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    const heard: string[] = [];
    job!.onCancel(() => heard.push('kept'));
    const stop = job!.onCancel(() => heard.push('stopped'));
    stop();
    handle.cancel('client went away');
    handle.cancel('again');
    expect(heard).toEqual(['kept']);
    expect(job!.signal!.aborted).toBe(true);
    expect((job!.signal!.reason as KilnError).message).toBe('client went away');
    job!.onCancel(() => heard.push('late')); // already cancelled: told at once
    expect(heard).toEqual(['kept', 'late']);
    expect(await rejectionCode(handle.result)).toBe(KilnErrorCode.Cancelled);
  });

  it('lets only the first settle count', async () => {
    const { queue } = setup();
    const handle = queue.submit('a');
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    job!.resolve('first');
    job!.reject(new KilnError(KilnErrorCode.EngineError, 'second'));
    job!.resolve('third');
    handle.cancel();
    expect(await handle.result).toBe('first');
  });

  it('stops listening to a caller signal once the job settles', async () => {
    const { queue } = setup();
    const controller = new AbortController();
    let listeners = 0;
    const signal = controller.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = (...args: Parameters<typeof add>) => (listeners++, add(...args));
    signal.removeEventListener = (...args: Parameters<typeof remove>) => (
      listeners--,
      remove(...args)
    );
    const handle = queue.submit('a', { signal });
    expect(listeners).toBe(1);
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    job!.resolve('ok');
    expect(listeners).toBe(0);
    expect(await handle.result).toBe('ok');
  });
});

describe('JobQueue with several consumers', () => {
  it('gives each job to exactly one consumer, in the order consumers asked', async () => {
    const { queue } = setup();
    const batches = [1, 2, 3].map(() => queue.takeBatch({ maxSize: 1, maxDelayMs: 0 }));
    expect(queue.waiting).toBe(3);
    queue.submit('a');
    queue.submit('b');
    queue.submit('c');
    expect((await Promise.all(batches)).map(inputs)).toEqual([['a'], ['b'], ['c']]);
  });

  it('sends a gathered batch off when a job arrives for an idle consumer, in order', async () => {
    const { clock, queue } = setup();
    const first = queue.takeBatch({ maxSize: 3, maxDelayMs: 100 });
    const second = queue.takeBatch({ maxSize: 3, maxDelayMs: 100 });
    queue.submit('a'); // starts `first`
    clock.advance(10);
    queue.submit('b'); // a worker is free: `first` leaves with what it holds, `second` starts
    expect(inputs(await first)).toEqual(['a']);
    expect((await inspect(second)).state).toBe('pending');
    queue.submit('c'); // nobody idle: joins `second`
    queue.submit('d'); // `second` is full
    expect(inputs(await second)).toEqual(['b', 'c', 'd']);
  });

  it('queues what no consumer can take and hands it to the next free one', async () => {
    const { queue } = setup();
    const first = queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    for (const x of ['a', 'b', 'c']) queue.submit(x);
    expect(inputs(await first)).toEqual(['a']);
    expect(queue.depth).toBe(2);
    expect(inputs(await queue.takeBatch({ maxSize: 4, maxDelayMs: 0 }))).toEqual(['b', 'c']);
  });
});

describe('JobQueue ranked takes', () => {
  it('takes the highest ranked jobs first, equal ranks oldest first, now or in a batch', async () => {
    const { queue } = setup<number>();
    for (const x of [3, 9, 1, 9, 5]) queue.submit(x);
    const rank = (x: number) => x;
    const values = (jobs: readonly Job<number, string>[]) => jobs.map((j) => j.input);
    expect(values(queue.takeNow(2, () => true, rank))).toEqual([9, 9]);
    // The first that does not fit holds back the rest, as in arrival order.
    expect(values(queue.takeNow(3, (x) => x < 5, rank))).toEqual([]);
    expect(values(await queue.takeBatch({ maxSize: 2, maxDelayMs: 0, rank }))).toEqual([5, 3]);
    expect(values(queue.takeNow(5))).toEqual([1]);
  });

  it('hands a rank how long each job has waited, so that waiting can raise it', async () => {
    const { clock, queue } = setup<number>();
    queue.submit(1);
    clock.advance(100);
    queue.submit(50);
    const seen: [number, number][] = [];
    const rank = (x: number, waitedMs: number) => {
      seen.push([x, waitedMs]);
      return x + waitedMs;
    };
    // 1 has waited 100 ms: 101 against 50.
    expect(queue.takeNow(1, () => true, rank).map((j) => j.input)).toEqual([1]);
    expect(seen).toEqual([
      [1, 100],
      [50, 0],
    ]);
  });
});

describe('JobQueue buckets', () => {
  it('batches only jobs of the first job’s bucket; others stay queued in order', async () => {
    const { queue } = setup({ bucketOf: (s: string) => s[0] });
    for (const x of ['a1', 'b1', 'a2', 'c1', 'b2', 'a3']) queue.submit(x);
    const take = () => queue.takeBatch({ maxSize: 8, maxDelayMs: 0 });
    expect(inputs(await take())).toEqual(['a1', 'a2', 'a3']);
    expect(inputs(await take())).toEqual(['b1', 'b2']);
    expect(inputs(await take())).toEqual(['c1']);
  });

  it('lets a job override its bucket', async () => {
    const { queue } = setup({ bucketOf: () => 'x' });
    queue.submit('a');
    queue.submit('b', { bucket: 7 });
    queue.submit('c');
    const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
    expect(job!.bucket).toBe('x');
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))).toEqual(['b']);
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 }))).toEqual(['c']);
  });

  it('sends a job of another bucket to an idle consumer while one gathers', async () => {
    const { clock, queue } = setup({ bucketOf: (s: string) => s[0] });
    const first = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    const second = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    queue.submit('a1');
    queue.submit('b1');
    queue.submit('a2');
    clock.advance(100);
    expect(inputs(await first)).toEqual(['a1', 'a2']);
    expect(inputs(await second)).toEqual(['b1']);
  });

  it('waits out no delay for its bucket while jobs of other buckets are queued', async () => {
    const { queue } = setup({ bucketOf: (s: string) => s[0] });
    for (const x of ['a1', 'b1', 'a2']) queue.submit(x);
    expect(inputs(await queue.takeBatch({ maxSize: 4, maxDelayMs: 100 }))).toEqual(['a1', 'a2']);
    // The last bucket left waits for more of its own, as any batch does.
    const last = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    expect((await inspect(last)).state).toBe('pending');
    queue.submit('b2');
    queue.close();
    expect(inputs(await last)).toEqual(['b1', 'b2']);
  });

  it('fails the submit with INVALID_INPUT when bucketOf throws', async () => {
    const { queue } = setup({
      bucketOf: () => {
        throw new Error('no length');
      },
    });
    expect(await rejectionCode(queue.submit('a').result)).toBe(KilnErrorCode.InvalidInput);
    expect(queue.depth).toBe(0);
  });
});

describe('JobQueue close, drain and failAll', () => {
  it('refuses new jobs after close, keeps queued ones, then tells consumers to stop', async () => {
    const { queue } = setup();
    queue.submit('a');
    queue.close();
    expect(await rejectionCode(queue.submit('b').result)).toBe(KilnErrorCode.Closed);
    const drained = queue.drain();
    expect((await inspect(drained)).state).toBe('pending');
    expect(inputs(await queue.takeBatch({ maxSize: 8, maxDelayMs: 100 }))).toEqual(['a']);
    expect((await inspect(drained)).state).toBe('resolved');
    expect(await queue.takeBatch({ maxSize: 8, maxDelayMs: 100 })).toEqual([]);
  });

  it('refuses with the close reason when one is given', async () => {
    const { queue } = setup();
    const reason = new KilnError(KilnErrorCode.ModelNotReady, 'model is unloading');
    queue.close(reason);
    expect(await inspect(queue.submit('a').result)).toEqual({ state: 'rejected', error: reason });
  });

  it('wakes waiting consumers with [] and ends gathering at once on close', async () => {
    const { queue } = setup();
    const gathering = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    const idle = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    queue.submit('a');
    queue.close();
    expect(inputs(await gathering)).toEqual(['a']);
    expect(await idle).toEqual([]);
  });

  it('drain resolves at once on an empty queue', async () => {
    const { queue } = setup();
    expect((await inspect(queue.drain())).state).toBe('resolved');
  });

  it('failAll rejects queued and gathered jobs with the error given', async () => {
    const { queue } = setup({ bucketOf: (s: string) => s[0] });
    const rejected: string[] = [];
    queue.on('rejected', (job, error) => rejected.push(`${job.input}:${error?.code}`));
    const gatherer = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    const handles = ['a1', 'b1', 'a2'].map((x) => queue.submit(x));
    const error = new KilnError(KilnErrorCode.WorkerCrashed, 'worker died');
    queue.failAll(error);
    expect(await Promise.all(handles.map((h) => rejectionCode(h.result)))).toEqual([
      KilnErrorCode.WorkerCrashed,
      KilnErrorCode.WorkerCrashed,
      KilnErrorCode.WorkerCrashed,
    ]);
    expect(rejected.sort()).toEqual([
      'a1:WORKER_CRASHED',
      'a2:WORKER_CRASHED',
      'b1:WORKER_CRASHED',
    ]);
    expect(queue.depth).toBe(0);
    // The consumer lost its batch and waits for new work.
    expect((await inspect(gatherer)).state).toBe('pending');
    queue.submit('c');
    queue.close();
    expect(inputs(await gatherer)).toEqual(['c']);
  });
});

describe('JobQueue requeueAlone', () => {
  it('puts handed-back jobs ahead of queued ones, each in a batch of its own', async () => {
    const { queue } = setup();
    const handles = ['a', 'b', 'c'].map((x) => queue.submit(x));
    const taken = await queue.takeBatch({ maxSize: 3, maxDelayMs: 0 });
    queue.submit('d');
    queue.submit('e');
    expect(queue.requeueAlone(taken)).toBe(true);
    expect(queue.depth).toBe(5);
    const take = () => queue.takeBatch({ maxSize: 8, maxDelayMs: 0 });
    expect(inputs(await take())).toEqual(['a']);
    expect(inputs(await take())).toEqual(['b']);
    const c = await take();
    expect(inputs(c)).toEqual(['c']);
    expect(inputs(await take())).toEqual(['d', 'e']);
    c[0]!.resolve('C');
    expect(await handles[2]!.result).toBe('C');
  });

  it('hands a job back to a consumer waiting for work at once', async () => {
    const { queue } = setup();
    queue.submit('a');
    const taken = await queue.takeBatch({ maxSize: 4, maxDelayMs: 0 });
    const waiting = queue.takeBatch({ maxSize: 4, maxDelayMs: 100 });
    queue.requeueAlone(taken);
    expect(inputs(await waiting)).toEqual(['a']);
    expect(queue.depth).toBe(0);
  });

  it('keeps the deadline a job was submitted with', async () => {
    const { clock, queue } = setup();
    const handle = queue.submit('a', { timeoutMs: 100 });
    const taken = await queue.takeBatch({ maxSize: 4, maxDelayMs: 0 });
    clock.advance(60);
    queue.requeueAlone(taken);
    clock.advance(39);
    expect((await inspect(handle.result)).state).toBe('pending');
    clock.advance(1);
    expect(await rejectionCode(handle.result)).toBe(KilnErrorCode.Timeout);
    expect(queue.depth).toBe(0);
  });

  it('skips settled jobs, and queues nothing once the queue is closed', async () => {
    const { queue } = setup();
    queue.submit('a');
    queue.submit('b');
    const taken = await queue.takeBatch({ maxSize: 4, maxDelayMs: 0 });
    taken[0]!.resolve('A');
    queue.requeueAlone(taken);
    expect(queue.depth).toBe(1);
    const again = await queue.takeBatch({ maxSize: 4, maxDelayMs: 0 });
    expect(inputs(again)).toEqual(['b']);
    queue.close();
    expect(queue.requeueAlone(again)).toBe(false);
    expect(queue.depth).toBe(0);
  });
});

describe('JobQueue events', () => {
  it('reports enqueued, taken and batch, and keeps working when a listener throws', async () => {
    const thrown: unknown[] = [];
    const { clock, queue } = setup({ onListenerError: (error) => thrown.push(error) });
    const seen: string[] = [];
    queue.on('enqueued', (job) => {
      seen.push(`enqueued ${job.input}`);
      throw new Error('listener bug');
    });
    queue.on('taken', (job) => seen.push(`taken ${job.input}`));
    queue.on('batch', (jobs, gatheredMs) => seen.push(`batch ${jobs.length} after ${gatheredMs}`));
    const batch = queue.takeBatch({ maxSize: 2, maxDelayMs: 30 });
    queue.submit('a');
    clock.advance(30);
    expect(inputs(await batch)).toEqual(['a']);
    expect(seen).toEqual(['enqueued a', 'taken a', 'batch 1 after 30']);
    expect(thrown).toEqual([new Error('listener bug')]);
  });

  it('off removes a listener', () => {
    const { queue } = setup();
    const seen: string[] = [];
    const listener = (job: Job<string, string>) => seen.push(job.input);
    queue.on('enqueued', listener);
    queue.submit('a');
    queue.off('enqueued', listener);
    queue.submit('b');
    expect(seen).toEqual(['a']);
  });
});
