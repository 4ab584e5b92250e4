import {
  DEFAULT_MAX_ROLLING_BATCH_SIZE,
  type GenerationChunk,
  RecentStepTime,
  admissionRank,
  type GenerationJob,
  type GenerationJobOf,
  type GenerationOutput,
  type RollingLoopStats,
  type StepReport,
} from '@kiln/batching';
import { KilnError, KilnErrorCode, type RollingAdmission } from '@kiln/core';
import type { GenerationNews, JobEnd, RollingSettings } from './generation-protocol.js';
import { PoolWorker } from './pool-worker.js';
import type { ThreadBackend } from './thread-backend.js';
import type { GenerationChannel, WorkerBackend } from './worker-backend.js';

/** A step worker's rolling-batch settings (`option.max_rolling_batch_size` and kin). */
export interface StepWorkerSettings extends RollingSettings {
  readonly onStep: (step: StepReport) => void;
  /** `option.rolling_batch_admission`: the order it takes waiting jobs in. */
  readonly admission?: RollingAdmission | undefined;
}

/** A job handed to the worker's loop, with what this side keeps of it. */
interface Handed {
  readonly job: GenerationJobOf;
  /** Pieces its reader has not taken yet: the sequence is held while there are any. */
  unread: number;
  /** Whether the loop admitted it: until then it waits there as in a queue. */
  admitted: boolean;
  readonly stopListening: () => void;
}

/**
 * A worker whose thread holds a step decoder and runs the rolling loop over it (see
 * GenerationHost): this side hands it jobs from the pool's queue while it has slots, delivers
 * the pieces that come back to each job's reader, tells it of cancellations and of readers
 * that are full, and settles each job as it ends. It starts, scales, retires and dies as any
 * pool worker; when it dies, the jobs it holds fail with its error (WORKER_CRASHED) and its
 * group replaces it.
 */
export class StepWorker extends PoolWorker<GenerationJob, GenerationOutput> {
  private settings: StepWorkerSettings | undefined;
  /** Its loop's recent step time, which ages waiting jobs under longest_first. */
  private readonly steps = new RecentStepTime();
  private readonly handed = new Map<number, Handed>();
  private latest: RollingLoopStats | undefined;
  private slotFreed: (() => void) | undefined;
  /** Aborts the wait for more jobs once the worker holds none: it is idle then. */
  private idle: AbortController | undefined;

  /** The pool passes its rolling-batch settings before the worker starts. */
  configure(settings: StepWorkerSettings): this {
    this.settings = settings;
    this.rank = admissionRank(settings.admission ?? 'first_come', () => this.steps.ms);
    return this;
  }

  /** The loop's figures as of its last step (undefined before its first). */
  generationStats(): RollingLoopStats | undefined {
    return this.latest;
  }

  protected override async serveJobs(): Promise<void> {
    const channel = this.backend.generation;
    const settings = this.settings;
    if (!channel || !settings) {
      this.dead = new KilnError(KilnErrorCode.Internal, `${this.label} is not a step worker`);
      return;
    }
    channel.onNews((news) => this.receive(channel, news));
    this.backend.onDeath((error) => this.failAll(error));
    const slots = settings.maxBatchSize ?? DEFAULT_MAX_ROLLING_BATCH_SIZE;
    while (!this.dead && !this.terminating) {
      if (this.leaving && !this.hooks.mustDrain(this)) break;
      const free = slots - this.handed.size;
      if (free <= 0) {
        await this.nextFreedSlot();
        continue;
      }
      let jobs: GenerationJobOf[];
      if (this.handed.size === 0) {
        this.setState('idle');
        jobs = await this.take({ maxSize: free, maxDelayMs: 0 });
        if (jobs.length === 0) break; // stopped, retired, dead, or the queue is closed and empty
      } else {
        // Busy: more jobs join as they come, until the last sequence ends (then: idle).
        this.idle = new AbortController();
        jobs = await this.takeWhileBusy(free, this.idle.signal);
        this.idle = undefined;
        if (jobs.length === 0) {
          if (this.queue.closed || this.leaving) break;
          continue;
        }
      }
      this.setState('busy');
      this.hand(channel, jobs);
    }
    // A leaving worker (or a closed queue's) finishes the sequences it holds.
    while (this.handed.size > 0 && !this.dead && !this.terminating) await this.nextFreedSlot();
  }

  protected override jobsInFlight(): readonly GenerationJobOf[] {
    return [...this.handed.values()].map((h) => h.job);
  }

  /** Hands jobs to the loop, dropping those settled meanwhile or past their queue deadline. */
  private hand(channel: GenerationChannel, jobs: readonly GenerationJobOf[]): void {
    const now = this.clock.now();
    const handed = jobs.filter((job) => {
      if (job.settled) return false;
      if (job.deadline === undefined || now < job.deadline) return true;
      this.expire(job);
      return false;
    });
    for (const job of handed)
      this.handed.set(job.id, {
        job,
        unread: 0,
        admitted: false,
        stopListening: job.onCancel(() => channel.cancel([job.id])),
      });
    if (handed.length > 0)
      channel.hand(
        handed.map((job) => ({ id: job.id, input: job.input, waitedMs: now - job.enqueuedAt })),
      );
  }

  private receive(channel: GenerationChannel, news: GenerationNews): void {
    this.latest = news.stats;
    for (const id of news.admitted) {
      const handed = this.handed.get(id);
      if (handed) handed.admitted = true;
    }
    this.expireWaiting(channel);
    for (const step of news.steps) {
      this.steps.observe(step.ms);
      this.settings?.onStep(step);
    }
    for (const { id, chunk } of news.chunks) this.deliver(channel, id, chunk);
    for (const end of news.ended) this.end(end);
  }

  /** Gives a piece to its job's reader; a reader that is full holds the sequence. */
  private deliver(channel: GenerationChannel, id: number, chunk: GenerationChunk): void {
    const handed = this.handed.get(id);
    if (!handed || handed.job.settled) return;
    const fail = (error: unknown) => {
      handed.job.reject(KilnError.wrap(error, KilnErrorCode.Internal));
      channel.cancel([id]);
    };
    let read: void | Promise<void>;
    try {
      read = handed.job.onChunk?.(chunk);
    } catch (error) {
      return fail(error);
    }
    if (!(read instanceof Promise)) return;
    if (handed.unread++ === 0) channel.hold(id, true);
    read.then(() => {
      if (--handed.unread === 0 && this.handed.has(id)) channel.hold(id, false);
    }, fail);
  }

  private end(end: JobEnd): void {
    const handed = this.handed.get(end.id);
    if (!handed) return;
    this.handed.delete(end.id);
    handed.stopListening();
    const { job } = handed;
    const result =
      'output' in end
        ? { ok: true as const, value: end.output }
        : 'error' in end
          ? { ok: false as const, error: KilnError.fromJSON(end.error) }
          : undefined;
    if (result?.ok) job.resolve(result.value);
    else if (result) job.reject(result.error);
    this.report(job, end, result);
    this.freeSlot();
  }

  /** Jobs waiting on the worker (its cache budget full) past their queue deadline time out. */
  private expireWaiting(channel: GenerationChannel): void {
    const now = this.clock.now();
    for (const [id, handed] of this.handed) {
      const { job } = handed;
      if (handed.admitted || job.deadline === undefined || now < job.deadline) continue;
      this.expire(job);
      channel.cancel([id]);
    }
  }

  /**
   * The worker died: the jobs it was decoding fail with why; those it had not admitted go back
   * to the queue for another worker.
   */
  private failAll(error: KilnError): void {
    const waiting: GenerationJobOf[] = [];
    for (const [id, handed] of [...this.handed]) {
      this.handed.delete(id);
      handed.stopListening();
      if (!handed.admitted && !handed.job.settled) waiting.push(handed.job);
      else {
        handed.job.reject(error);
        this.report(handed.job, { id, queueMs: 0, runMs: 0, dropped: true }, undefined);
      }
    }
    if (waiting.length > 0 && !this.queue.requeueAlone(waiting))
      for (const job of waiting) job.reject(error);
    this.freeSlot();
  }

  /** Each generation counts as the pool counts a batch of one. */
  private report(
    job: GenerationJobOf,
    end: JobEnd,
    result: { ok: true; value: GenerationOutput } | { ok: false; error: KilnError } | undefined,
  ): void {
    this.hooks.batchDone({
      worker: this,
      jobs: [{ job, queueMs: end.queueMs, answered: result !== undefined, retried: false }],
      run: { results: result ? [result] : [], timings: undefined },
      error: undefined,
      runMs: end.runMs,
    });
  }

  private nextFreedSlot(): Promise<void> {
    return new Promise((resolve) => (this.slotFreed = resolve));
  }

  private freeSlot(): void {
    const freed = this.slotFreed;
    this.slotFreed = undefined;
    freed?.();
    if (this.handed.size === 0) this.idle?.abort();
  }
}

/** A step worker's thread as the pool drives it: its lifecycle, and a rolling loop instead of batches. */
export function stepBackend(thread: ThreadBackend): WorkerBackend<GenerationJob, GenerationOutput> {
  return {
    kind: thread.kind,
    computesElsewhere: true,
    start: () => thread.start(),
    run: () =>
      Promise.reject(
        new KilnError(KilnErrorCode.Internal, 'a step worker runs a rolling loop, not batches'),
      ),
    generation: thread.generation,
    endProfiling: (options) => thread.endProfiling(options),
    onDeath: (listener) => thread.onDeath(listener),
    stop: () => thread.stop(),
    terminate: () => thread.terminate(),
  };
}
