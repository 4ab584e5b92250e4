import type { KilnError, KilnErrorCode } from '@kiln/core';
import type { WorkerState } from './pool-worker.js';

/** One job that ran, for metrics: the batch's timings are the job's. */
export interface JobMetrics {
  readonly jobId: number;
  readonly device: string;
  readonly workerId: number;
  /** From acceptance to the start of its batch. */
  readonly queueMs: number;
  /** Jobs in the execution it was part of. */
  readonly batchSize: number;
  readonly preprocessMs: number;
  readonly inferenceMs: number;
  readonly postprocessMs: number;
  /** Whether the prediction succeeded. */
  readonly ok: boolean;
  /** False when the caller had already been answered (TIMEOUT, CANCELLED) before it finished. */
  readonly answered: boolean;
  /** The error code when it failed. */
  readonly code: KilnErrorCode | undefined;
}

/** One execution. */
export interface BatchMetrics {
  readonly device: string;
  readonly workerId: number;
  readonly batchSize: number;
  /** Forward calls made (more than one when inputs could not share a batch). */
  readonly forwards: number;
  readonly preprocessMs: number;
  readonly inferenceMs: number;
  readonly postprocessMs: number;
  /** The whole run as the pool saw it, messaging to a worker thread included. */
  readonly runMs: number;
  /** False when the worker failed as a whole (crash). */
  readonly ok: boolean;
}

export interface WorkerStateChange {
  readonly device: string;
  readonly workerId: number;
  readonly state: WorkerState;
  readonly previous: WorkerState;
  readonly error: KilnError | undefined;
}

/** A job that never ran: refused, timed out or cancelled. */
export interface JobDropped {
  readonly jobId: number;
  readonly error: KilnError | undefined;
}

export interface WorkerPoolEventMap {
  job: JobMetrics;
  batch: BatchMetrics;
  worker: WorkerStateChange;
  rejected: JobDropped;
  expired: JobDropped;
  cancelled: JobDropped;
}

export type WorkerPoolEvent = keyof WorkerPoolEventMap;
export type WorkerPoolListener<E extends WorkerPoolEvent> = (event: WorkerPoolEventMap[E]) => void;

/**
 * The pool's listeners. A listener that throws must not stop a worker's loop, so its error
 * is rethrown on a later microtask, where it surfaces as an EventEmitter's would.
 */
export class PoolEvents {
  private readonly listeners = new Map<WorkerPoolEvent, ((event: never) => void)[]>();

  on<E extends WorkerPoolEvent>(event: E, listener: WorkerPoolListener<E>): void {
    this.listeners.set(event, [...(this.listeners.get(event) ?? []), listener]);
  }

  off<E extends WorkerPoolEvent>(event: E, listener: WorkerPoolListener<E>): void {
    const list = this.listeners.get(event);
    if (list)
      this.listeners.set(
        event,
        list.filter((l) => l !== listener),
      );
  }

  emit<E extends WorkerPoolEvent>(event: E, payload: WorkerPoolEventMap[E]): void {
    for (const listener of this.listeners.get(event) ?? []) {
      try {
        (listener as WorkerPoolListener<E>)(payload);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
