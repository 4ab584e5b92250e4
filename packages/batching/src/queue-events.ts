import type { KilnError } from '@kiln/core';
import type { Job } from './job.js';

/** Per-job events of a JobQueue. */
export type JobEvent = 'enqueued' | 'taken' | 'expired' | 'cancelled' | 'rejected';

/** `error` is set for `expired`, `cancelled` and `rejected`. */
export type JobListener<I, O> = (job: Job<I, O>, error?: KilnError) => void;

/** One takeBatch result and how long its consumer waited for more jobs after the first. */
export type BatchListener<I, O> = (jobs: readonly Job<I, O>[], gatheredMs: number) => void;

type AnyListener<I, O> = JobListener<I, O> | BatchListener<I, O>;

/**
 * Rethrows a listener's error on a later microtask, where it surfaces as an uncaught
 * exception just as it would from an EventEmitter.
 */
export function rethrowLater(error: unknown): void {
  queueMicrotask(() => {
    throw error;
  });
}

/**
 * The listeners of one queue. A listener that throws must not leave the queue half-updated,
 * so its error goes to `onError` instead of unwinding through the queue.
 */
export class QueueEvents<I, O> {
  private readonly listeners = new Map<JobEvent | 'batch', AnyListener<I, O>[]>();

  constructor(private readonly onError: (error: unknown) => void = rethrowLater) {}

  on(event: JobEvent | 'batch', listener: AnyListener<I, O>): void {
    this.listeners.set(event, [...(this.listeners.get(event) ?? []), listener]);
  }

  off(event: JobEvent | 'batch', listener: AnyListener<I, O>): void {
    const list = this.listeners.get(event);
    if (list)
      this.listeners.set(
        event,
        list.filter((l) => l !== listener),
      );
  }

  emitJob(event: JobEvent, job: Job<I, O>, error?: KilnError): void {
    for (const listener of this.listeners.get(event) ?? []) {
      this.call(() => (listener as JobListener<I, O>)(job, error));
    }
  }

  emitBatch(jobs: readonly Job<I, O>[], gatheredMs: number): void {
    for (const listener of this.listeners.get('batch') ?? []) {
      this.call(() => (listener as BatchListener<I, O>)(jobs, gatheredMs));
    }
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.onError(error);
    }
  }
}
