import { KilnError, KilnErrorCode } from '@kiln/core';
import type { QueueNode } from './linked-queue.js';

/** Which jobs may share a batch: only jobs of the same bucket do. */
export type BucketKey = string | number;

export interface JobOptions {
  /** Fails the job with TIMEOUT when it is still queued this many ms after submit. */
  timeoutMs?: number;
  /** Aborting it cancels the job (CANCELLED), queued or running. */
  signal?: AbortSignal;
  /** Overrides the queue's `bucketOf` for this job. */
  bucket?: BucketKey;
  /**
   * Gets each piece of a job that streams its result (a generation's GenerationChunk), in
   * order, before the job settles. A promise it returns holds the job's next piece (its next
   * step) until it settles: a slow reader slows only its own job.
   */
  onChunk?: (chunk: unknown) => void | Promise<void>;
}

/** One accepted request, as a worker sees it. */
export interface Job<I, O> {
  readonly id: number;
  readonly input: I;
  /** When it was submitted, in ms of the queue's clock. */
  readonly enqueuedAt: number;
  /** When it times out, in ms of the queue's clock; a worker checks it before running. */
  readonly deadline: number | undefined;
  readonly bucket: BucketKey | undefined;
  /** Aborts when the caller cancels, so a worker can skip or stop the work. */
  readonly signal: AbortSignal | undefined;
  /** Where a streaming job's pieces go (JobOptions.onChunk). */
  readonly onChunk?: ((chunk: unknown) => void | Promise<void>) | undefined;
  /**
   * Calls `listener` once when the caller cancels the job; returns what stops listening. The
   * cheap form of `signal`, which costs an AbortController per job once asked for.
   */
  onCancel(listener: () => void): () => void;
  /** Settles the caller's promise; the first settle wins and later calls are ignored. */
  resolve(output: O): void;
  reject(error: KilnError): void;
  readonly settled: boolean;
}

/** What the caller of `submit` holds. */
export interface JobHandle<O> {
  readonly id: number;
  readonly result: Promise<O>;
  /** Cancels the job: it leaves the queue, or its result is dropped if it already runs. */
  cancel(reason?: string): void;
}

/**
 * Where a job is: not (yet) accepted, waiting, held by a consumer gathering a batch, handed
 * to a worker, or answered.
 */
export type JobState = 'new' | 'queued' | 'gathering' | 'taken' | 'settled';

/** What a QueuedJob tells the queue that owns it. */
export interface JobHooks<I, O> {
  /** Called once, when the job settles in any way. */
  settled(job: QueuedJob<I, O>): void;
  /** Called once, when the caller cancels an unsettled job. */
  cancelled(job: QueuedJob<I, O>, error: KilnError): void;
}

/** The queue's record of a job. Internal: callers see Job and JobHandle. */
export class QueuedJob<I, O> implements Job<I, O> {
  state: JobState = 'new';
  /** Its nodes in the queue's order and bucket lists while `queued`. */
  orderNode: QueueNode<QueuedJob<I, O>> | undefined;
  bucketNode: QueueNode<QueuedJob<I, O>> | undefined;
  /** The consumer gathering it while `gathering`. */
  holder: unknown;
  /** Deadline timer handle while queued. */
  timer: unknown;
  /** Why it failed, once it has. */
  error: KilnError | undefined;
  /** Handed back after its worker died: it runs in a batch of its own (see requeueAlone). */
  alone = false;

  readonly result: Promise<O>;
  /** Made when `signal` is first asked for: most jobs never need one. */
  private controller: AbortController | undefined;
  private cancelError: KilnError | undefined;
  private cancelListeners: (() => void)[] | undefined;
  private resolveResult!: (output: O) => void;
  private rejectResult!: (error: KilnError) => void;
  private readonly onCallerAbort: (() => void) | undefined;

  constructor(
    readonly id: number,
    readonly input: I,
    readonly enqueuedAt: number,
    readonly deadline: number | undefined,
    readonly bucket: BucketKey | undefined,
    private readonly callerSignal: AbortSignal | undefined,
    private readonly hooks: JobHooks<I, O>,
    readonly onChunk?: ((chunk: unknown) => void | Promise<void>) | undefined,
  ) {
    this.result = new Promise<O>((resolve, reject) => {
      this.resolveResult = resolve;
      this.rejectResult = reject;
    });
    if (callerSignal && !callerSignal.aborted) {
      this.onCallerAbort = () => this.cancel(cancellationError(callerSignal));
      callerSignal.addEventListener('abort', this.onCallerAbort, { once: true });
    }
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.cancelError) this.controller.abort(this.cancelError);
    }
    return this.controller.signal;
  }

  onCancel(listener: () => void): () => void {
    if (this.cancelError) {
      listener();
      return () => undefined;
    }
    (this.cancelListeners ??= []).push(listener);
    return () => {
      const i = this.cancelListeners?.indexOf(listener) ?? -1;
      if (i >= 0) this.cancelListeners!.splice(i, 1);
    };
  }

  get settled(): boolean {
    return this.state === 'settled';
  }

  resolve(output: O): void {
    if (this.settle()) this.resolveResult(output);
  }

  reject(error: KilnError): void {
    if (!this.settle()) return;
    this.error = error;
    this.rejectResult(error);
  }

  /** Cancels an unsettled job: aborts its signal and lets the queue fail it. */
  cancel(error: KilnError): void {
    if (this.settled || this.cancelError) return;
    this.cancelError = error;
    this.controller?.abort(error);
    const listeners = this.cancelListeners;
    this.cancelListeners = undefined;
    listeners?.forEach((listener) => listener());
    this.hooks.cancelled(this, error);
  }

  handle(): JobHandle<O> {
    return {
      id: this.id,
      result: this.result,
      cancel: (reason?: string) =>
        this.cancel(new KilnError(KilnErrorCode.Cancelled, reason ?? 'request was cancelled')),
    };
  }

  private settle(): boolean {
    if (this.state === 'settled') return false;
    this.hooks.settled(this);
    this.state = 'settled';
    if (this.onCallerAbort) this.callerSignal?.removeEventListener('abort', this.onCallerAbort);
    return true;
  }
}

/** The caller's abort reason when it is a KilnError, else a plain CANCELLED error. */
export function cancellationError(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  if (reason instanceof KilnError) return reason;
  const detail =
    reason instanceof Error && reason.name !== 'AbortError' ? `: ${reason.message}` : '';
  return new KilnError(KilnErrorCode.Cancelled, `request was cancelled${detail}`);
}
