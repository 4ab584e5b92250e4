import {
  type GenerationJob,
  type GenerationJobOf,
  type GenerationOutput,
  type JobOutcome,
  RollingLoop,
  type SequenceStepper,
  type StepRequest,
} from '@kiln/batching';
import type { KilnError } from '@kiln/core';
import type { GenerationNews, HandedJob, JobEnd, RollingSettings } from './generation-protocol.js';

/**
 * A step worker's rolling loop, on the worker's thread beside its stepper: steps follow one
 * another with no thread between the loop and the model. Jobs arrive as the pool hands them
 * over and wait here until the loop admits them (slots and cache budget allowing); tokens,
 * endings and step reports go back once a step, in one message.
 */
export class GenerationHost {
  private readonly loop: RollingLoop;
  private readonly jobs = new Map<number, HandedGeneration>();
  private pending: HandedGeneration[] = [];
  private wake: (() => void) | undefined;
  private news: {
    admitted: number[];
    chunks: GenerationNews['chunks'][number][];
    ended: JobEnd[];
    steps: GenerationNews['steps'][number][];
  } = {
    admitted: [],
    chunks: [],
    ended: [],
    steps: [],
  };
  private flushing = false;
  private closed = false;
  private readonly served: Promise<void>;

  constructor(
    stepper: SequenceStepper,
    settings: RollingSettings,
    private readonly send: (news: GenerationNews) => void,
  ) {
    const model = stepper.info;
    const bytes = settings.maxKvCacheBytes;
    const runner = {
      step: async (request: StepRequest) => {
        let turned = false;
        setImmediate(() => (turned = true));
        const stepping = stepper.step(request);
        // The last step's news leaves while this one computes (the engine's threads run it).
        this.flush();
        const reply = await stepping;
        // A model whose steps never wait would keep this thread's messages (jobs, cancellations,
        // holds) out: such a step lets them in before the next.
        if (!turned) await new Promise<void>((resolve) => setImmediate(resolve));
        return reply;
      },
    };
    this.loop = new RollingLoop(runner, model, {
      maxBatchSize: settings.maxBatchSize,
      maxPrefillTokens: settings.maxPrefillTokens,
      maxCacheTokens:
        bytes === undefined ? undefined : Math.max(1, Math.floor(bytes / model.cacheBytesPerToken)),
      onDone: (job, outcome) => this.ended(job as HandedGeneration, outcome),
    });
    this.loop.onStep((step) => {
      this.news.steps.push(step);
      this.flushSoon();
    });
    this.served = this.serve();
  }

  /** Jobs the pool handed over: admitted at the loop's next step that has room. */
  take(jobs: readonly HandedJob[]): void {
    const now = performance.now();
    for (const handed of jobs) {
      const job = new HandedGeneration(handed, now - handed.waitedMs, this);
      this.jobs.set(handed.id, job);
      this.pending.push(job);
    }
    this.wake?.();
  }

  /** Jobs settled on the pool's side: a waiting one leaves, a running one ends at the next step. */
  cancel(ids: readonly number[]): void {
    for (const id of ids) {
      const job = this.jobs.get(id);
      if (!job) continue;
      job.cancel();
      const waiting = this.pending.indexOf(job);
      if (waiting >= 0) {
        this.pending.splice(waiting, 1);
        this.jobs.delete(id);
        this.news.ended.push({ id, dropped: true, queueMs: 0, runMs: 0 });
        this.flushSoon();
      }
    }
    this.wake?.();
  }

  hold(id: number, held: boolean): void {
    this.jobs.get(id)?.hold(held);
  }

  /** The job's piece, sent with the step's others. */
  chunk(id: number, chunk: GenerationNews['chunks'][number]['chunk']): void {
    this.news.chunks.push({ id, chunk });
    this.flushSoon();
  }

  /** Ends every job (the worker stops) and waits for the loop to settle. */
  async close(): Promise<void> {
    this.closed = true;
    this.cancel([...this.jobs.keys()]);
    this.wake?.();
    await this.served;
  }

  private async serve(): Promise<void> {
    while (!this.closed) {
      const first = this.pending.shift();
      if (!first) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      this.news.admitted.push(first.id);
      this.flushing = true;
      this.flush();
      await this.loop.run([first], (max, fits) => this.admit(max, fits));
    }
  }

  /** Waiting jobs, oldest first, while the loop has room for them. */
  private admit(max: number, fits: (job: GenerationJob) => boolean): GenerationJobOf[] {
    const taken: GenerationJobOf[] = [];
    while (taken.length < max && this.pending.length > 0 && fits(this.pending[0]!.input))
      taken.push(this.pending.shift()!);
    if (taken.length > 0) {
      // Told at once, before a step that might end this thread: the pool hands back only jobs
      // a dead worker surely had not taken up.
      for (const job of taken) this.news.admitted.push(job.id);
      this.flushing = true;
      this.flush();
    }
    return taken;
  }

  private ended(job: HandedGeneration, outcome: JobOutcome): void {
    this.jobs.delete(job.id);
    const times = {
      id: job.id,
      queueMs: outcome.admittedAt - job.enqueuedAt,
      runMs: performance.now() - outcome.admittedAt,
    };
    this.news.ended.push(
      !outcome.answered
        ? { ...times, dropped: true }
        : 'output' in outcome
          ? { ...times, output: outcome.output }
          : { ...times, error: outcome.error.toJSON() },
    );
    this.flushSoon();
  }

  /**
   * Sends what gathered at the next step's start (see the runner), or on the next turn of
   * this thread's event loop when no step comes first: one message a step.
   */
  private flushSoon(): void {
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    if (!this.flushing) return;
    this.flushing = false;
    const news = this.news;
    this.news = { admitted: [], chunks: [], ended: [], steps: [] };
    this.send({ ...news, stats: this.loop.stats() });
  }
}

/** A handed-over job as the loop sees it: its pieces and its end go back to the pool. */
class HandedGeneration implements GenerationJobOf {
  readonly id: number;
  readonly input: GenerationJob;
  readonly deadline = undefined;
  readonly bucket = undefined;
  readonly signal = undefined;
  settled = false;
  private held: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(
    handed: HandedJob,
    readonly enqueuedAt: number,
    private readonly host: GenerationHost,
  ) {
    this.id = handed.id;
    this.input = handed.input;
  }

  /** A piece goes back; while the pool's reader is full, the sequence waits for it. */
  readonly onChunk = (chunk: unknown): Promise<void> | undefined => {
    this.host.chunk(this.id, chunk as GenerationNews['chunks'][number]['chunk']);
    return this.held?.promise;
  };

  onCancel(): () => void {
    return () => undefined;
  }

  resolve(_output: GenerationOutput): void {
    this.settled = true;
  }

  reject(_error: KilnError): void {
    this.settled = true;
  }

  cancel(): void {
    this.settled = true;
    this.hold(false);
  }

  hold(held: boolean): void {
    if (held && !this.held) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.held = { promise, resolve };
    } else if (!held && this.held) {
      this.held.resolve();
      this.held = undefined;
    }
  }
}
