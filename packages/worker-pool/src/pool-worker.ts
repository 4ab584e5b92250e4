import type { Clock, Job, JobQueue, JobRank } from '@kiln/batching';
import { KilnError, KilnErrorCode, type PredictResult } from '@kiln/core';
import type { BatchRun, ChunkSink, WorkerBackend } from './worker-backend.js';
import type { WorkerFacts } from './worker-protocol.js';

const MIN_IDLE_RECHECK_MS = 1000;
const NO_JOBS: ReadonlySet<never> = new Set();

/** Where a worker is in its life; describe() and stats() count workers per state. */
export type WorkerState = 'starting' | 'idle' | 'busy' | 'stopping' | 'stopped' | 'failed';

/** One execution, for metrics: which jobs ran and where the time went. */
export interface BatchReport<I, O> {
  readonly worker: PoolWorker<I, O>;
  /**
   * Jobs that ran, with the ms each waited between acceptance and this batch, whether this
   * run answered it (false when it had timed out or been cancelled meanwhile), and whether it
   * went back to the queue to run again alone (its worker died under a batch of several).
   */
  readonly jobs: readonly {
    readonly job: Job<I, O>;
    readonly queueMs: number;
    readonly answered: boolean;
    readonly retried: boolean;
  }[];
  /** The results (undefined when the worker failed as a whole: then `error` is set). */
  readonly run: BatchRun<O> | undefined;
  readonly error: KilnError | undefined;
  /** Wall time of the run, ms of the pool's clock. */
  readonly runMs: number;
}

/** What a worker asks of, and tells, the group that owns it. */
export interface PoolWorkerHooks<I, O> {
  /** An idle worker past max_idle_time asks to leave; true means it leaves now. */
  mayRetire(worker: PoolWorker<I, O>): boolean;
  /** A leaving worker keeps serving while nothing else could drain the queue. */
  mustDrain(worker: PoolWorker<I, O>): boolean;
  stateChanged(worker: PoolWorker<I, O>, previous: WorkerState): void;
  batchDone(report: BatchReport<I, O>): void;
  /** A taken job was past its deadline, or reached it while running. */
  timedOut(job: Job<I, O>): void;
  /** The worker is gone; `error` when it crashed or failed to start. */
  exited(worker: PoolWorker<I, O>, error: KilnError | undefined, phase: 'start' | 'run'): void;
}

/** How workers take batches; the pool may change it while they run (adaptive batching). */
export interface BatchingPolicy {
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
}

export interface PoolWorkerOptions {
  readonly batching: BatchingPolicy;
  readonly maxIdleTimeMs: number;
  readonly startTimeoutMs: number;
  /** How long a run may outlive every job in it before the worker is ended. */
  readonly hungRunTimeoutMs: number;
}

/**
 * One worker: starts its backend, then loops — take a batch from the queue, drop jobs already
 * settled or past their deadline, run the rest, settle each job with its own result — until
 * it retires, is stopped, or dies. A job it took is always settled, whatever happens.
 */
export class PoolWorker<I, O> {
  readonly startedAt = new Date();
  facts: WorkerFacts | undefined;
  /** Why it failed, when it did. */
  error: KilnError | undefined;
  /** Retiring, scaled down or stopped: it no longer counts as capacity. */
  leaving = false;
  /** Resolves once the worker has exited, however it ended. */
  readonly exited: Promise<void>;
  private current: WorkerState = 'starting';
  /**
   * How this worker orders the waiting jobs it takes (a JobRank of its inputs, typed loosely so
   * that pools of different inputs stay interchangeable); undefined: oldest first.
   */
  protected rank: JobRank<never> | undefined;
  private takeController: AbortController | undefined;
  protected dead: KilnError | undefined;
  protected terminating = false;
  private finished = false;
  private inFlight: readonly Job<I, O>[] = [];
  private batchController: AbortController | undefined;
  /** Aborted once the worker leaves (stopped, retired, terminated): ends the take it waits in. */
  private readonly lifetime = new AbortController();
  /** Handed to runs until one is aborted (a cancelled batch): most batches need no new one. */
  private runController: AbortController | undefined;
  private resolveExited!: () => void;

  constructor(
    readonly id: number,
    /** Position in its group, stable across replacement: picks the cores it is pinned to. */
    readonly slot: number,
    readonly label: string,
    protected readonly backend: WorkerBackend<I, O>,
    protected readonly queue: JobQueue<I, O>,
    protected readonly clock: Clock,
    private readonly options: PoolWorkerOptions,
    protected readonly hooks: PoolWorkerHooks<I, O>,
  ) {
    this.exited = new Promise((resolve) => (this.resolveExited = resolve));
  }

  get state(): WorkerState {
    return this.current;
  }

  get kind(): 'thread' | 'inline' {
    return this.backend.kind;
  }

  /** Ends the engine's per-operator profile where the worker runs (see WorkerBackend). */
  endProfiling(options: { skipRuns?: number }): Promise<unknown> {
    return this.backend.endProfiling(options);
  }

  /** Starts the backend and then serves; resolves once ready, rejects when it cannot start. */
  async start(): Promise<void> {
    try {
      this.facts = await this.withStartTimeout(this.backend.start());
    } catch (error) {
      this.error = KilnError.wrap(
        error,
        KilnErrorCode.ModelLoadFailed,
        `${this.label} could not start`,
      );
      await this.backend.terminate().catch(() => undefined);
      this.finish('failed', this.error, 'start');
      throw this.error;
    }
    this.backend.onDeath((error) => this.onDeath(error));
    void this.serve();
  }

  /** Leaves after the batch in flight (at once when idle). */
  stop(): void {
    this.leaving = true;
    this.takeController?.abort();
    this.lifetime.abort();
  }

  /** Ends the worker now: jobs in flight fail with CLOSED, even if the engine never returns. */
  async terminate(): Promise<void> {
    this.leaving = true;
    this.terminating = true;
    this.takeController?.abort();
    this.lifetime.abort();
    const closed = new KilnError(KilnErrorCode.Closed, `${this.label} was stopped`);
    for (const job of this.jobsInFlight()) job.reject(closed);
    this.batchController?.abort(closed);
    await this.backend.terminate().catch(() => undefined);
    if (this.current !== 'starting') this.finish('stopped', undefined, 'run');
  }

  private async serve(): Promise<void> {
    await this.serveJobs();
    if (this.finished) return;
    this.setState('stopping');
    if (this.dead) {
      await this.backend.terminate().catch(() => undefined);
      this.finish('failed', this.dead, 'run');
    } else {
      await this.backend.stop().catch(() => undefined);
      this.finish('stopped', undefined, 'run');
    }
  }

  /** Takes and runs batches until the worker leaves, dies or the queue is closed and empty. */
  protected async serveJobs(): Promise<void> {
    while (!this.dead && !this.terminating) {
      if (this.leaving && !this.hooks.mustDrain(this)) break;
      this.setState('idle');
      const jobs = await this.take();
      if (jobs.length === 0) break; // stopped, retired, dead, or the queue is closed and empty
      await this.runBatch(jobs);
    }
  }

  /** The jobs it runs now: a terminated worker fails them. */
  protected jobsInFlight(): readonly Job<I, O>[] {
    return this.inFlight;
  }

  /**
   * Waits for the next batch (`batching`, or the pool's batch size and delay); an idle worker
   * past max_idle_time leaves meanwhile when its group allows.
   */
  protected async take(
    batching = {
      maxSize: this.options.batching.batchSize,
      maxDelayMs: this.options.batching.maxBatchDelayMs,
    },
  ): Promise<Job<I, O>[]> {
    if (this.leaving) return this.takeWhileLeaving(batching);
    // A worker serving a busy model finds work waiting: no idle timer to arm and clear.
    const ms = this.options.maxIdleTimeMs;
    let timer: unknown;
    const check = () => {
      if (this.hooks.mayRetire(this)) {
        this.leaving = true;
        this.lifetime.abort();
      } else {
        // Kept for minWorkers: ask again later (never in a tight loop when max_idle_time is 0).
        timer = this.clock.setTimeout(check, Math.max(ms, MIN_IDLE_RECHECK_MS));
      }
    };
    if (this.queue.depth === 0) timer = this.clock.setTimeout(check, ms);
    try {
      return await this.queue.takeBatch({
        ...batching,
        rank: this.rank as JobRank<I> | undefined,
        signal: this.lifetime.signal,
      });
    } finally {
      if (timer !== undefined) this.clock.clearTimeout(timer);
    }
  }

  /**
   * Waits for up to `maxSize` jobs while the worker is busy with others (a step worker's
   * sequences): no idle timer, since the worker is not idle. Empty when `until` aborts, the
   * worker leaves or dies, or the queue is closed and empty.
   */
  protected takeWhileBusy(maxSize: number, until: AbortSignal): Promise<Job<I, O>[]> {
    const batching = { maxSize, maxDelayMs: 0 };
    if (this.leaving) return this.takeWhileLeaving(batching);
    return this.queue.takeBatch({
      ...batching,
      rank: this.rank as JobRank<I> | undefined,
      signal: AbortSignal.any([this.lifetime.signal, until]),
    });
  }

  /** A leaving worker that drains the queue stops waiting once the queue is empty. */
  private async takeWhileLeaving(batching: {
    maxSize: number;
    maxDelayMs: number;
  }): Promise<Job<I, O>[]> {
    const controller = new AbortController();
    this.takeController = controller;
    void this.queue.drain().then(() => controller.abort());
    try {
      return await this.queue.takeBatch({
        ...batching,
        rank: this.rank as JobRank<I> | undefined,
        signal: controller.signal,
      });
    } finally {
      this.takeController = undefined;
    }
  }

  private async runBatch(taken: readonly Job<I, O>[]): Promise<void> {
    const takenAt = this.clock.now();
    const jobs: { job: Job<I, O>; queueMs: number }[] = [];
    for (const job of taken) {
      if (job.settled) continue;
      if (job.deadline !== undefined && takenAt >= job.deadline) {
        this.expire(job);
        continue;
      }
      jobs.push({ job, queueMs: takenAt - job.enqueuedAt });
    }
    if (jobs.length === 0) return;
    if (this.dead) {
      // Taken as the worker died, never run: they wait for a live worker instead.
      if (!this.queue.requeueAlone(jobs.map((j) => j.job)))
        for (const { job } of jobs) job.reject(this.dead);
      return;
    }

    this.setState('busy');
    const controller = (this.runController ??= new AbortController());
    this.batchController = controller;
    this.inFlight = jobs.map((j) => j.job);
    const unwatch = this.watch(this.inFlight, controller);
    let run: BatchRun<O> | undefined;
    let error: KilnError | undefined;
    try {
      run = await this.backend.run(
        jobs.map((j) => j.job.input),
        controller.signal,
        chunkSinksOf(jobs),
      );
    } catch (cause) {
      error = this.failure(cause);
    } finally {
      unwatch();
      this.inFlight = [];
      this.batchController = undefined;
      if (controller.signal.aborted) this.runController = undefined;
    }
    const runMs = this.clock.now() - takenAt;
    if (!run) {
      this.dead ??= error!;
      const retried = this.retryAlone(
        jobs.map((j) => j.job),
        jobs.length,
        error!,
      );
      const report = this.reportOf(jobs, undefined, error, runMs, retried);
      for (const { job } of jobs) if (!retried.has(job)) job.reject(error!);
      this.hooks.batchDone(report);
      return;
    }
    // The engine's own thread or process died under it: this predictor cannot run again.
    const crash = run.results.find(isCrash);
    if (crash && !crash.ok) {
      this.dead ??= crash.error;
      const crashed = jobs.filter((_, i) => isCrash(run.results[i])).map((j) => j.job);
      const retried = this.retryAlone(crashed, jobs.length, crash.error);
      this.settle(jobs, run, runMs, retried);
    } else if (this.nextBatchWaits()) {
      // The serve loop hands the waiting batch over within this turn's microtasks; these
      // answers follow once they have run, so the engine computes while they are written.
      setImmediate(() => this.settle(jobs, run, runMs, NO_JOBS));
    } else {
      this.settle(jobs, run, runMs, NO_JOBS);
    }
  }

  /**
   * Sends the unanswered jobs of a batch of several whose worker died back to the queue, each
   * to run alone on a live worker (the group replaces this one): which request killed it is
   * not known, and the others deserve an answer. A job that ran alone is taken to be the cause
   * and gets the error, so a request costs at most two workers and fails only itself.
   * Returns the jobs requeued: none when the worker was terminated or the queue is closed.
   */
  private retryAlone(
    jobs: readonly Job<I, O>[],
    batchSize: number,
    error: KilnError,
  ): ReadonlySet<Job<I, O>> {
    if (batchSize < 2 || this.terminating || error.code !== KilnErrorCode.WorkerCrashed)
      return NO_JOBS;
    const unanswered = jobs.filter((job) => !job.settled);
    if (unanswered.length === 0 || !this.queue.requeueAlone(unanswered)) return NO_JOBS;
    return new Set(unanswered);
  }

  /** Whether the next batch can be handed to an engine that computes elsewhere right now. */
  private nextBatchWaits(): boolean {
    if (!this.backend.computesElsewhere || this.dead || this.leaving) return false;
    const { batchSize, maxBatchDelayMs } = this.options.batching;
    // With a batch delay, fewer jobs than a batch would wait for more.
    return this.queue.depth >= (maxBatchDelayMs > 0 ? batchSize : 1);
  }

  private settle(
    jobs: readonly { job: Job<I, O>; queueMs: number }[],
    run: BatchRun<O>,
    runMs: number,
    retried: ReadonlySet<Job<I, O>>,
  ): void {
    const report = this.reportOf(jobs, run, undefined, runMs, retried);
    jobs.forEach(({ job }, i) => {
      const result = run.results[i];
      if (retried.has(job)) return;
      if (!result)
        job.reject(
          new KilnError(KilnErrorCode.Internal, `${this.label} returned no result for a job`),
        );
      else if (result.ok) job.resolve(result.value);
      else job.reject(result.error);
    });
    this.hooks.batchDone(report);
  }

  /**
   * The batch as the pool counts it; `answered`: neither settled (timed out, cancelled) before
   * nor sent back to the queue.
   */
  private reportOf(
    jobs: readonly { job: Job<I, O>; queueMs: number }[],
    run: BatchRun<O> | undefined,
    error: KilnError | undefined,
    runMs: number,
    retried: ReadonlySet<Job<I, O>>,
  ): BatchReport<I, O> {
    const reported = jobs.map(({ job, queueMs }) => {
      const again = retried.has(job);
      return { job, queueMs, answered: !again && !job.settled, retried: again };
    });
    return { worker: this, jobs: reported, run, error, runMs };
  }

  /**
   * Fails jobs that reach their deadline while running, and aborts the run once no job of
   * the batch waits for it any more. Returns the function that stops watching.
   */
  private watch(jobs: readonly Job<I, O>[], controller: AbortController): () => void {
    let hung: unknown;
    const check = () => {
      if (controller.signal.aborted || !jobs.every((job) => job.settled)) return;
      controller.abort();
      hung = this.clock.setTimeout(() => this.abandon(), this.options.hungRunTimeoutMs);
    };
    // The job settles right after its signal fires, so look once the cancel has finished.
    const onCancel = () => queueMicrotask(check);
    const stopListening = jobs.map((job) => job.onCancel(onCancel));
    // One timer for the batch, at its earliest deadline, instead of one per job.
    let deadlineTimer: unknown;
    const armDeadline = () => {
      const pending = jobs.filter((job) => !job.settled && job.deadline !== undefined);
      if (pending.length === 0) return;
      const next = Math.min(...pending.map((job) => job.deadline!));
      deadlineTimer = this.clock.setTimeout(
        () => {
          deadlineTimer = undefined;
          const at = this.clock.now();
          for (const job of pending) if (job.deadline! <= at) this.expire(job);
          check();
          armDeadline();
        },
        Math.max(0, next - this.clock.now()),
      );
    };
    armDeadline();
    return () => {
      if (hung !== undefined) this.clock.clearTimeout(hung);
      if (deadlineTimer !== undefined) this.clock.clearTimeout(deadlineTimer);
      for (const stop of stopListening) stop();
    };
  }

  /**
   * A run that goes on although nobody waits for it any more (an engine stuck in a loop):
   * the worker is ended and counted as crashed, so its group replaces it.
   */
  private abandon(): void {
    const ms = this.options.hungRunTimeoutMs;
    this.dead ??= new KilnError(
      KilnErrorCode.WorkerCrashed,
      `${this.label} was still running ${ms} ms after every request of its batch had been answered; it was terminated`,
    );
    this.leaving = true;
    void this.backend.terminate().catch(() => undefined);
    this.finish('failed', this.dead, 'run');
  }

  protected expire(job: Job<I, O>): void {
    if (job.settled) return;
    const limit = job.deadline === undefined ? 0 : job.deadline - job.enqueuedAt;
    job.reject(
      new KilnError(KilnErrorCode.Timeout, `request timed out after ${limit} ms`, {
        details: { timeoutMs: limit },
      }),
    );
    this.hooks.timedOut(job);
  }

  /** The error jobs get when the worker failed as a whole. */
  private failure(cause: unknown): KilnError {
    if (this.terminating && KilnError.is(cause, KilnErrorCode.Closed)) return cause;
    if (KilnError.is(cause, KilnErrorCode.WorkerCrashed)) return cause;
    const message = cause instanceof Error ? cause.message : String(cause);
    return new KilnError(KilnErrorCode.WorkerCrashed, `${this.label} failed: ${message}`, {
      cause,
    });
  }

  private onDeath(error: KilnError): void {
    this.dead ??= error;
    this.takeController?.abort();
    this.lifetime.abort();
  }

  private withStartTimeout<T>(promise: Promise<T>): Promise<T> {
    const ms = this.options.startTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = this.clock.setTimeout(
        () =>
          reject(
            new KilnError(
              KilnErrorCode.ModelLoadFailed,
              `${this.label} was not ready after ${ms} ms`,
            ),
          ),
        ms,
      );
      promise.then(
        (value) => (this.clock.clearTimeout(timer), resolve(value)),
        (error: unknown) => (this.clock.clearTimeout(timer), reject(error as Error)),
      );
    });
  }

  protected setState(state: WorkerState): void {
    const previous = this.current;
    if (previous === state || (this.finished && state !== 'stopped' && state !== 'failed')) return;
    this.current = state;
    this.hooks.stateChanged(this, previous);
  }

  private finish(
    state: 'stopped' | 'failed',
    error: KilnError | undefined,
    phase: 'start' | 'run',
  ): void {
    if (this.finished) return;
    this.finished = true;
    this.error ??= error;
    this.setState(state);
    this.hooks.exited(this, error, phase);
    this.resolveExited();
  }
}

function isCrash<O>(result: PredictResult<O> | undefined): boolean {
  return result !== undefined && !result.ok && result.error.code === KilnErrorCode.WorkerCrashed;
}

/** Where each job's streamed pieces go, by index; undefined when no job of the batch streams. */
function chunkSinksOf<I, O>(
  jobs: readonly { job: Job<I, O> }[],
): (ChunkSink | undefined)[] | undefined {
  return jobs.some(({ job }) => job.onChunk) ? jobs.map(({ job }) => job.onChunk) : undefined;
}
