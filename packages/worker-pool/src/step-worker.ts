import {
  type GenerationJob,
  type GenerationJobOf,
  type GenerationOutput,
  type JobOutcome,
  RollingLoop,
  type StepReport,
} from '@kiln/batching';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { PoolWorker } from './pool-worker.js';
import type { ThreadBackend } from './thread-backend.js';
import type { WorkerBackend } from './worker-backend.js';

/** A step worker's rolling-batch settings (`option.max_rolling_batch_size` and kin). */
export interface StepWorkerSettings {
  readonly maxBatchSize: number | undefined;
  readonly maxPrefillTokens: number | undefined;
  /** The worker's key/value cache budget; default: batch size × the model's longest sequence. */
  readonly maxKvCacheBytes: number | undefined;
  readonly onStep: (step: StepReport) => void;
}

/**
 * A worker whose thread holds a step decoder: its rolling loop runs here, on the main thread,
 * admitting jobs from the pool's queue between steps while it has slots and cache to spare.
 * It starts, scales, retires and dies as any pool worker; when it dies, the jobs it decodes
 * fail with WORKER_CRASHED and its group replaces it.
 */
export class StepWorker extends PoolWorker<GenerationJob, GenerationOutput> {
  private loop: RollingLoop | undefined;
  private settings: StepWorkerSettings | undefined;

  /** The pool passes its rolling-batch settings before the worker starts. */
  configure(settings: StepWorkerSettings): this {
    this.settings = settings;
    return this;
  }

  /** Its rolling loop, once the worker is ready. */
  get rolling(): RollingLoop | undefined {
    return this.loop;
  }

  protected override async serveJobs(): Promise<void> {
    let loop: RollingLoop;
    try {
      loop = this.newLoop();
    } catch (error) {
      this.dead = KilnError.wrap(error, KilnErrorCode.ModelLoadFailed);
      return;
    }
    this.loop = loop;
    while (!this.dead && !this.terminating) {
      if (this.leaving && !this.hooks.mustDrain(this)) break;
      this.setState('idle');
      const first = await this.take({ maxSize: 1, maxDelayMs: 0 });
      if (first.length === 0) break; // stopped, retired, dead, or the queue is closed and empty
      this.setState('busy');
      await loop.run(this.admissible(first), (max, fits) =>
        this.mayAdmit() ? this.admissible(this.queue.takeNow(max, fits)) : [],
      );
    }
  }

  protected override jobsInFlight(): readonly GenerationJobOf[] {
    return this.loop?.jobs() ?? [];
  }

  private newLoop(): RollingLoop {
    const model = this.facts?.step;
    const step = this.backend.step?.bind(this.backend);
    const settings = this.settings;
    if (!model || !step || !settings)
      throw new KilnError(KilnErrorCode.Internal, `${this.label} is not a step worker`);
    const bytes = settings.maxKvCacheBytes;
    const loop = new RollingLoop({ step }, model, {
      maxBatchSize: settings.maxBatchSize,
      maxPrefillTokens: settings.maxPrefillTokens,
      maxCacheTokens:
        bytes === undefined ? undefined : Math.max(1, Math.floor(bytes / model.cacheBytesPerToken)),
      clock: this.clock,
      onDone: (job, outcome) => this.report(job, outcome),
    });
    loop.onStep(settings.onStep);
    return loop;
  }

  /** A leaving worker finishes its sequences but takes no new ones (unless it must drain). */
  private mayAdmit(): boolean {
    if (this.dead || this.terminating) return false;
    return !this.leaving || this.hooks.mustDrain(this);
  }

  /** Drops jobs settled meanwhile and fails those past their queue deadline. */
  private admissible(jobs: readonly GenerationJobOf[]): GenerationJobOf[] {
    const now = this.clock.now();
    return jobs.filter((job) => {
      if (job.settled) return false;
      if (job.deadline === undefined || now < job.deadline) return true;
      this.expire(job);
      return false;
    });
  }

  /** Each generation counts as the pool counts a batch of one. */
  private report(job: GenerationJobOf, outcome: JobOutcome): void {
    const result = !outcome.answered
      ? undefined
      : 'output' in outcome
        ? { ok: true as const, value: outcome.output }
        : { ok: false as const, error: outcome.error };
    this.hooks.batchDone({
      worker: this,
      jobs: [
        {
          job,
          queueMs: outcome.admittedAt - job.enqueuedAt,
          answered: outcome.answered,
          retried: false,
        },
      ],
      run: { results: result ? [result] : [], timings: undefined },
      error: undefined,
      runMs: this.clock.now() - outcome.admittedAt,
    });
  }
}

/** A step worker's thread as the pool drives it: its lifecycle, and steps instead of batches. */
export function stepBackend(thread: ThreadBackend): WorkerBackend<GenerationJob, GenerationOutput> {
  return {
    kind: thread.kind,
    computesElsewhere: true,
    start: () => thread.start(),
    run: () =>
      Promise.reject(
        new KilnError(KilnErrorCode.Internal, 'a step worker runs steps, not batches'),
      ),
    step: (request) => thread.step(request),
    endProfiling: (options) => thread.endProfiling(options),
    onDeath: (listener) => thread.onDeath(listener),
    stop: () => thread.stop(),
    terminate: () => thread.terminate(),
  };
}
