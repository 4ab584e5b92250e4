import { KilnError, KilnErrorCode } from '@kiln/core';
import { type Clock, systemClock } from './clock.js';
import {
  type BucketKey,
  type Job,
  type JobHandle,
  type JobHooks,
  type JobOptions,
  QueuedJob,
  cancellationError,
} from './job.js';
import { LinkedQueue, type QueueNode } from './linked-queue.js';
import { QueuedJobs } from './queued-jobs.js';
import {
  QueueEvents,
  type BatchListener,
  type JobEvent,
  type JobListener,
} from './queue-events.js';

/** DJL's `job_queue_size` default. */
export const DEFAULT_QUEUE_CAPACITY = 1000;

export interface JobQueueOptions<I> {
  /** Most jobs accepted and not yet handed to a worker (`job_queue_size`); default 1000. */
  capacity?: number;
  clock?: Clock;
  /** Timeout of jobs submitted without `timeoutMs`; none when unset. */
  defaultTimeoutMs?: number;
  /** Sequence bucketing: only jobs of one bucket share a batch. */
  bucketOf?: (input: I) => BucketKey | undefined;
  /** Gets errors thrown by event listeners; by default they are rethrown on a microtask. */
  onListenerError?: (error: unknown) => void;
}

export interface TakeBatchOptions<I = unknown> {
  /** Most jobs in one batch (`batch_size`). */
  maxSize: number;
  /** How long to wait for more jobs once the first was taken (`max_batch_delay`). */
  maxDelayMs: number;
  /** Stops waiting: resolves [] while no job is held, or returns the jobs held so far. */
  signal?: AbortSignal;
  /** Takes the waiting jobs it ranks highest first, instead of the oldest (see JobRank). */
  rank?: JobRank<I> | undefined;
}

/**
 * A waiting job's rank for a take that asks for one (a rolling loop's admission policy):
 * higher goes first, equal ranks oldest first. `waitedMs` lets a rank grow with the wait, so
 * that no job waits forever.
 */
export type JobRank<I> = (input: I, waitedMs: number) => number;

/** A takeBatch call in progress. */
interface Consumer<I, O> {
  readonly maxSize: number;
  readonly maxDelayMs: number;
  readonly rank: JobRank<I> | undefined;
  readonly signal: AbortSignal | undefined;
  readonly deliver: (jobs: Job<I, O>[]) => void;
  jobs: QueuedJob<I, O>[];
  bucket: BucketKey | undefined;
  startedAt: number;
  timer: unknown;
  /** Its node in the idle or the gathering list. */
  node: QueueNode<Consumer<I, O>> | undefined;
  onAbort: (() => void) | undefined;
  done: boolean;
}

/**
 * A bounded FIFO of jobs that workers drain in batches, with DJL's aggregation rule: a
 * consumer waits for a first job, takes up to `maxSize` queued jobs at once, then waits only
 * for what is left of `maxDelayMs` for more — less when a job arrives for an idle consumer,
 * and not at all when jobs of other buckets are queued as it starts (they would wait out the
 * delay too). Each job goes to exactly one consumer, and jobs of a bucket are handed out in
 * order.
 *
 * Accepted jobs are either queued (in the global order list and their bucket's list) or held
 * by one consumer that is gathering a batch. Two invariants keep routing O(1) per job: while a
 * consumer is idle nothing is queued, and no queued job belongs to the bucket of a consumer
 * that is gathering (it would have taken it).
 */
export class JobQueue<I, O> {
  private readonly queued = new QueuedJobs<I, O>();
  private readonly idle = new LinkedQueue<Consumer<I, O>>();
  private readonly gathering = new LinkedQueue<Consumer<I, O>>();
  private readonly events: QueueEvents<I, O>;
  private readonly drainWaiters: (() => void)[] = [];
  private readonly hooks: JobHooks<I, O> = {
    settled: (job) => this.onSettled(job),
    cancelled: (job, error) => {
      job.reject(error);
      this.events.emitJob('cancelled', job, error);
    },
  };
  private readonly maxJobs: number;
  private readonly queueClock: Clock;
  private readonly defaultTimeoutMs: number | undefined;
  private readonly bucketOf: ((input: I) => BucketKey | undefined) | undefined;
  private nextId = 1;
  private pending = 0;
  private closeError: KilnError | undefined;

  constructor(options: JobQueueOptions<I> = {}) {
    const capacity = options.capacity ?? DEFAULT_QUEUE_CAPACITY;
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `queue capacity must be an integer ≥ 1, got ${capacity}`,
      );
    }
    if (options.defaultTimeoutMs !== undefined && !validTimeout(options.defaultTimeoutMs)) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `defaultTimeoutMs must be a number > 0, got ${options.defaultTimeoutMs}`,
      );
    }
    this.maxJobs = capacity;
    this.queueClock = options.clock ?? systemClock;
    this.defaultTimeoutMs = options.defaultTimeoutMs;
    this.bucketOf = options.bucketOf;
    this.events = new QueueEvents(options.onListenerError);
  }

  /** Jobs accepted and not yet handed to a worker (queued, or held by a gathering consumer). */
  get depth(): number {
    return this.pending;
  }

  get capacity(): number {
    return this.maxJobs;
  }

  /** takeBatch calls waiting for a first job: workers with nothing to do. */
  get waiting(): number {
    return this.idle.size;
  }

  get closed(): boolean {
    return this.closeError !== undefined;
  }

  get clock(): Clock {
    return this.queueClock;
  }

  /**
   * Accepts a job, or fails its result at once: CLOSED after close, QUEUE_FULL at capacity
   * (checked synchronously, the job is never queued), CANCELLED for an aborted signal,
   * INVALID_INPUT for bad options or a bucketOf that throws.
   */
  submit(input: I, options: JobOptions = {}): JobHandle<O> {
    const id = this.nextId++;
    const now = this.queueClock.now();
    const refuse = (event: JobEvent, error: KilnError, bucket?: BucketKey): JobHandle<O> => {
      const job = new QueuedJob<I, O>(id, input, now, undefined, bucket, undefined, this.hooks);
      job.reject(error);
      this.events.emitJob(event, job, error);
      return job.handle();
    };

    if (this.closeError) return refuse('rejected', this.closeError);
    const timeoutMs = options.timeoutMs ?? this.defaultTimeoutMs;
    if (timeoutMs !== undefined && !validTimeout(timeoutMs)) {
      return refuse('rejected', invalidInput(`timeoutMs must be a number > 0, got ${timeoutMs}`));
    }
    let bucket: BucketKey | undefined;
    try {
      bucket = options.bucket ?? this.bucketOf?.(input);
    } catch (error) {
      return refuse(
        'rejected',
        KilnError.wrap(error, KilnErrorCode.InvalidInput, 'cannot bucket input'),
      );
    }
    if (options.signal?.aborted) {
      return refuse('cancelled', cancellationError(options.signal), bucket);
    }
    if (this.pending >= this.maxJobs) {
      return refuse(
        'rejected',
        new KilnError(KilnErrorCode.QueueFull, `job queue is full (${this.maxJobs} jobs)`, {
          details: { capacity: this.maxJobs },
        }),
        bucket,
      );
    }

    const finite = timeoutMs !== undefined && Number.isFinite(timeoutMs);
    const deadline = finite ? now + timeoutMs : undefined;
    const job = new QueuedJob<I, O>(
      id,
      input,
      now,
      deadline,
      bucket,
      options.signal,
      this.hooks,
      options.onChunk,
    );
    job.state = 'queued';
    this.pending++;
    if (finite) {
      job.timer = this.queueClock.setTimeout(() => this.expire(job, timeoutMs), timeoutMs);
    }
    this.events.emitJob('enqueued', job);
    this.route(job);
    return job.handle();
  }

  /**
   * Waits for a batch of 1..maxSize jobs of one bucket, oldest first. Resolves [] when the
   * signal aborts before a job was taken, or when the queue is closed and empty: the
   * consumer should stop.
   */
  takeBatch(options: TakeBatchOptions<I>): Promise<Job<I, O>[]> {
    const { maxSize, maxDelayMs, signal, rank } = options;
    if (!Number.isSafeInteger(maxSize) || maxSize < 1) {
      return Promise.reject(
        new KilnError(
          KilnErrorCode.InvalidConfig,
          `maxSize must be an integer ≥ 1, got ${maxSize}`,
        ),
      );
    }
    if (!(maxDelayMs >= 0 && maxDelayMs < Infinity)) {
      return Promise.reject(
        new KilnError(
          KilnErrorCode.InvalidConfig,
          `maxDelayMs must be a finite number ≥ 0, got ${maxDelayMs}`,
        ),
      );
    }
    if (signal?.aborted) return Promise.resolve([]);
    return new Promise((deliver) => {
      const consumer: Consumer<I, O> = {
        maxSize,
        maxDelayMs,
        rank,
        signal,
        deliver,
        jobs: [],
        bucket: undefined,
        startedAt: 0,
        timer: undefined,
        node: undefined,
        onAbort: undefined,
        done: false,
      };
      this.wait(consumer);
      // A batch handed over at once (a busy queue) never waits: no abort listener to add and
      // remove, which costs more than the take itself.
      if (signal && !consumer.done) {
        consumer.onAbort = () => this.abortConsumer(consumer);
        signal.addEventListener('abort', consumer.onAbort, { once: true });
      }
    });
  }

  /**
   * Takes queued jobs now, oldest first (or highest `rank` first), while `fits` accepts them,
   * up to `maxSize`; never waits. The first job that does not fit holds back those behind it.
   * A rolling loop admits jobs with it between its steps.
   */
  takeNow(
    maxSize: number,
    fits: (input: I) => boolean = () => true,
    rank?: JobRank<I>,
  ): Job<I, O>[] {
    const jobs: QueuedJob<I, O>[] = [];
    const order = rank ? this.ranked(rank) : this.queued;
    for (const job of order) {
      if (jobs.length >= maxSize || !fits(job.input)) break;
      jobs.push(job);
    }
    for (const job of jobs) {
      this.queued.remove(job);
      job.state = 'taken';
      this.clearDeadline(job);
    }
    if (jobs.length === 0) return jobs;
    this.pending -= jobs.length;
    for (const job of jobs) this.events.emitJob('taken', job);
    this.checkDrained();
    return jobs;
  }

  /** Refuses new jobs (CLOSED, or `reason`); queued jobs stay for workers to drain. */
  close(reason?: KilnError): void {
    if (this.closeError) return;
    this.closeError = reason ?? new KilnError(KilnErrorCode.Closed, 'job queue is closed');
    // No job can join a batch any more, so waiting for one is pointless.
    for (const consumer of [...this.gathering]) this.finish(consumer);
    for (const consumer of [...this.idle]) this.deliverEmpty(consumer);
  }

  /** Resolves once no job is queued or held by a gathering consumer. */
  drain(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /**
   * Hands back jobs a worker took but could not answer because it died: they go ahead of
   * every queued job, each to be taken alone (a batch of its own), so that the one that kills
   * workers fails by itself. Their deadlines hold as before. Returns false, queuing nothing,
   * on a closed queue: no worker may be left to drain it.
   */
  requeueAlone(jobs: readonly Job<I, O>[]): boolean {
    if (this.closeError) return false;
    const now = this.queueClock.now();
    // Each to the front, the last first: they keep their order.
    for (let i = jobs.length - 1; i >= 0; i--) {
      const job = jobs[i];
      if (!(job instanceof QueuedJob) || job.state !== 'taken') continue;
      const queued = job as QueuedJob<I, O>;
      queued.state = 'queued';
      queued.alone = true;
      this.pending++;
      this.queued.addFirst(queued);
      const deadline = queued.deadline;
      if (deadline !== undefined) {
        const timeoutMs = deadline - queued.enqueuedAt;
        queued.timer = this.queueClock.setTimeout(
          () => this.expire(queued, timeoutMs),
          Math.max(0, deadline - now),
        );
      }
    }
    // Nothing is queued while a consumer is idle: each idle one takes a job now.
    while (this.queued.size > 0) {
      const idle = this.idle.shift();
      if (!idle) break;
      idle.node = undefined;
      this.start(idle);
    }
    return true;
  }

  /** Fails every job not yet handed to a worker. */
  failAll(error: KilnError): void {
    const jobs = [...this.queued];
    for (const consumer of this.gathering) jobs.push(...consumer.jobs);
    for (const job of jobs) {
      if (job.settled) continue;
      job.reject(error);
      this.events.emitJob('rejected', job, error);
    }
  }

  /**
   * Measurements: `enqueued` (accepted), `taken` (handed to a worker), `expired` (TIMEOUT while
   * queued), `cancelled` (by the caller, queued or running), `rejected` (refused at submit, or
   * failed by failAll) — with the error as second argument — and `batch` per takeBatch result.
   */
  on(event: JobEvent, listener: JobListener<I, O>): this;
  on(event: 'batch', listener: BatchListener<I, O>): this;
  on(event: JobEvent | 'batch', listener: JobListener<I, O> | BatchListener<I, O>): this {
    this.events.on(event, listener);
    return this;
  }

  off(event: JobEvent, listener: JobListener<I, O>): this;
  off(event: 'batch', listener: BatchListener<I, O>): this;
  off(event: JobEvent | 'batch', listener: JobListener<I, O> | BatchListener<I, O>): this {
    this.events.off(event, listener);
    return this;
  }

  /**
   * Gives a new job to the consumer gathering its bucket, else queues it. When a consumer is
   * idle, a free worker is waiting: batches being gathered for the job's bucket stop waiting
   * for more and leave now (their jobs are older, so order holds), and the job starts a batch
   * of its own on the idle consumer. Arrivals so spread over every free worker (as DJL's
   * workers, polling one queue in turn, share them) and batches grow once all are busy: one
   * worker gathering a whole burst while another idles would halve a closed-loop client's
   * throughput.
   */
  private route(job: QueuedJob<I, O>): void {
    const idle = this.idle.shift();
    if (idle) {
      idle.node = undefined;
      for (const consumer of [...this.gathering]) {
        if (consumer.bucket === job.bucket) this.finish(consumer);
      }
      this.queued.add(job); // nothing else is queued while a consumer is idle: it takes this job
      this.start(idle);
      return;
    }
    for (const consumer of this.gathering) {
      if (consumer.bucket !== job.bucket) continue;
      this.hold(consumer, job);
      if (consumer.jobs.length >= consumer.maxSize) this.finish(consumer);
      return;
    }
    this.queued.add(job);
  }

  /** A consumer with no job: starts a batch, or waits for a job (or stops on a closed queue). */
  private wait(consumer: Consumer<I, O>): void {
    if (consumer.done) return;
    if (this.queued.size > 0) this.start(consumer);
    else if (this.closeError) this.deliverEmpty(consumer);
    else consumer.node = this.idle.push(consumer);
  }

  /**
   * Takes the oldest queued job (or the highest ranked) and as many of its bucket as fit, then
   * waits out the delay.
   */
  private start(consumer: Consumer<I, O>): void {
    const oldest = this.queued.oldest()!;
    consumer.startedAt = this.queueClock.now();
    if (oldest.alone) {
      // Requeued jobs lead the queue and each makes a batch of its own.
      consumer.bucket = oldest.bucket;
      this.queued.remove(oldest);
      this.hold(consumer, oldest);
      this.finish(consumer);
      return;
    }
    if (consumer.rank) {
      const ranked = this.ranked(consumer.rank);
      const bucket = (consumer.bucket = ranked[0]!.bucket);
      for (const job of ranked) {
        if (job.bucket !== bucket) continue;
        this.queued.remove(job);
        this.hold(consumer, job);
        if (consumer.jobs.length >= consumer.maxSize) break;
      }
    } else {
      const bucket = (consumer.bucket = oldest.bucket);
      for (let job = this.queued.oldestOf(bucket); job; job = this.queued.oldestOf(bucket)) {
        this.queued.remove(job);
        this.hold(consumer, job);
        if (consumer.jobs.length >= consumer.maxSize) break;
      }
    }
    // Jobs of other buckets left queued would wait out this batch's delay: it leaves now.
    const othersWait = this.queued.size > 0;
    if (
      consumer.jobs.length >= consumer.maxSize ||
      consumer.maxDelayMs <= 0 ||
      othersWait ||
      this.closeError
    ) {
      this.finish(consumer);
      return;
    }
    consumer.node = this.gathering.push(consumer);
    consumer.timer = this.queueClock.setTimeout(() => this.finish(consumer), consumer.maxDelayMs);
  }

  /** The queued jobs, highest `rank` first; equal ranks keep their order (oldest first). */
  private ranked(rank: JobRank<I>): QueuedJob<I, O>[] {
    const now = this.queueClock.now();
    const jobs = [...this.queued].map((job, order) => ({
      job,
      order,
      rank: rank(job.input, now - job.enqueuedAt),
    }));
    jobs.sort((a, b) => b.rank - a.rank || a.order - b.order);
    return jobs.map(({ job }) => job);
  }

  private hold(consumer: Consumer<I, O>, job: QueuedJob<I, O>): void {
    job.state = 'gathering';
    job.holder = consumer;
    consumer.jobs.push(job);
  }

  /** Hands a consumer the jobs it holds. */
  private finish(consumer: Consumer<I, O>): void {
    if (consumer.done) return;
    this.release(consumer);
    const jobs = consumer.jobs;
    consumer.jobs = [];
    for (const job of jobs) {
      job.state = 'taken';
      job.holder = undefined;
      this.clearDeadline(job);
    }
    this.pending -= jobs.length;
    for (const job of jobs) this.events.emitJob('taken', job);
    this.events.emitBatch(jobs, this.queueClock.now() - consumer.startedAt);
    consumer.deliver(jobs);
    this.checkDrained();
  }

  private deliverEmpty(consumer: Consumer<I, O>): void {
    if (consumer.done) return;
    this.release(consumer);
    consumer.deliver([]);
  }

  /** Ends a consumer's wait: its timer, its list node and its abort listener. */
  private release(consumer: Consumer<I, O>): void {
    consumer.done = true;
    this.stopGathering(consumer);
    if (consumer.node) this.idle.remove(consumer.node);
    consumer.node = undefined;
    if (consumer.onAbort) consumer.signal?.removeEventListener('abort', consumer.onAbort);
  }

  private stopGathering(consumer: Consumer<I, O>): void {
    if (consumer.timer !== undefined) this.queueClock.clearTimeout(consumer.timer);
    consumer.timer = undefined;
    if (consumer.node && this.gathering.remove(consumer.node)) consumer.node = undefined;
  }

  private abortConsumer(consumer: Consumer<I, O>): void {
    if (consumer.jobs.length > 0) this.finish(consumer);
    else this.deliverEmpty(consumer);
  }

  private expire(job: QueuedJob<I, O>, timeoutMs: number): void {
    job.timer = undefined;
    if (job.state !== 'queued' && job.state !== 'gathering') return;
    const message = `request timed out after ${timeoutMs} ms in the queue`;
    const error = new KilnError(KilnErrorCode.Timeout, message, { details: { timeoutMs } });
    job.reject(error);
    this.events.emitJob('expired', job, error);
  }

  /** A job settled (cancelled, expired, failed or answered): drop it from wherever it waits. */
  private onSettled(job: QueuedJob<I, O>): void {
    this.clearDeadline(job);
    if (job.state === 'queued') {
      this.queued.remove(job);
      this.pending--;
    } else if (job.state === 'gathering') {
      const consumer = job.holder as Consumer<I, O>;
      job.holder = undefined;
      consumer.jobs.splice(consumer.jobs.indexOf(job), 1);
      this.pending--;
      if (consumer.jobs.length === 0) {
        // Its whole batch went away: it is a consumer without a job again.
        this.stopGathering(consumer);
        this.wait(consumer);
      }
    } else {
      return;
    }
    this.checkDrained();
  }

  private clearDeadline(job: QueuedJob<I, O>): void {
    if (job.timer === undefined) return;
    this.queueClock.clearTimeout(job.timer);
    job.timer = undefined;
  }

  private checkDrained(): void {
    if (this.pending !== 0) return;
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }
}

function validTimeout(ms: number): boolean {
  return typeof ms === 'number' && ms > 0;
}

function invalidInput(message: string): KilnError {
  return new KilnError(KilnErrorCode.InvalidInput, message);
}
