import type {
  GenerationChunk,
  GenerationJob,
  GenerationOutput,
  RollingLoopStats,
  StepReport,
} from '@kiln/batching';
import type { SerializedKilnError } from '@kiln/core';

/**
 * What a step worker's rolling loop and the pool say to each other. The loop runs on the
 * worker's thread beside the model, so its steps follow one another without waiting for this
 * thread; jobs come to it as the pool's queue hands them over, and what it makes comes back a
 * step's worth at a time.
 */

/** The rolling settings a step worker's loop runs with (`option.max_rolling_batch_size`…). */
export interface RollingSettings {
  readonly maxBatchSize: number | undefined;
  readonly maxPrefillTokens: number | undefined;
  /** The worker's key/value cache budget; default: batch size × the model's longest sequence. */
  readonly maxKvCacheBytes: number | undefined;
}

/** A job handed to a step worker, and how long it waited in the pool's queue. */
export interface HandedJob {
  readonly id: number;
  readonly input: GenerationJob;
  readonly waitedMs: number;
}

/** How a job the worker was handed ended, with its times on the worker. */
export type JobEnd = { readonly id: number; readonly queueMs: number; readonly runMs: number } & (
  | { readonly output: GenerationOutput }
  | { readonly error: SerializedKilnError }
  /** Cancelled here (or timed out): nobody waits for it. */
  | { readonly dropped: true }
);

/** What a step worker reports after a step, or after jobs end between steps. */
export interface GenerationNews {
  /** Jobs the loop admitted (until then they wait on the worker as in a queue). */
  readonly admitted: readonly number[];
  readonly chunks: readonly { readonly id: number; readonly chunk: GenerationChunk }[];
  readonly ended: readonly JobEnd[];
  readonly steps: readonly StepReport[];
  readonly stats: RollingLoopStats;
}

/** Main thread → host thread, for a step worker. */
export type GenerationToHost =
  | { readonly type: 'generate'; readonly worker: number; readonly jobs: readonly HandedJob[] }
  /** Jobs settled on this side (a client gone, a timeout): their sequences end. */
  | { readonly type: 'generate-cancel'; readonly worker: number; readonly ids: readonly number[] }
  /** A job's reader is full (held) or has drained: its sequence sits out steps meanwhile. */
  | {
      readonly type: 'generate-hold';
      readonly worker: number;
      readonly id: number;
      readonly held: boolean;
    };

/** Host thread → main thread, for a step worker. */
export type GenerationFromHost = {
  readonly type: 'generated';
  readonly worker: number;
} & GenerationNews;
