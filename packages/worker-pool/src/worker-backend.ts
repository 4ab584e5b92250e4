import type { GenerationNews, HandedJob } from './generation-protocol.js';
import type { KilnError, PredictResult, PredictTimings } from '@kiln/core';
import type { WorkerFacts } from './worker-protocol.js';

/** A job's JobOptions.onChunk. */
export type ChunkSink = (chunk: unknown) => void | Promise<void>;

/** One executed batch: a result per input, in order, and where the time went. */
export interface BatchRun<O> {
  readonly results: readonly PredictResult<O>[];
  readonly timings: PredictTimings | undefined;
}

/**
 * What runs a worker's batches: a predictor on a worker thread, or one on the main thread
 * over a shared model. One batch in flight at a time.
 */
export interface WorkerBackend<I, O> {
  readonly kind: 'thread' | 'inline';
  /**
   * Whether a batch computes off the main thread (a worker thread, or an engine's own threads
   * or processes): the worker then hands the next waiting batch over before it answers the
   * last one, so that the engine computes while the main thread writes the answers. Absent:
   * the batch computes on the main thread.
   */
  readonly computesElsewhere?: boolean;
  /** Loads what the worker needs; rejects (with the reason) when it cannot. */
  start(): Promise<WorkerFacts>;
  /**
   * Runs one batch; each input succeeds or fails on its own. Rejects only when the worker
   * itself failed (its thread died, its engine failed as a whole): it must then be replaced.
   * `onChunk` has, by index, where the pieces of an input whose answer streams go (its job's
   * JobOptions.onChunk); backends whose answers never stream ignore it.
   */
  run(
    inputs: readonly I[],
    signal: AbortSignal,
    onChunk?: readonly (ChunkSink | undefined)[],
  ): Promise<BatchRun<O>>;
  /** A step worker's rolling loop, which runs where the model is (see GenerationHost). */
  readonly generation?: GenerationChannel;
  /** Ends the engine's per-operator profile of this worker's context (ONNX Runtime profiling). */
  endProfiling(options: { skipRuns?: number }): Promise<unknown>;
  /** Registers the listener called once when the worker dies on its own, even while idle. */
  onDeath(listener: (error: KilnError) => void): void;
  /** Lets the worker finish and release what it holds. */
  stop(): Promise<void>;
  /** Ends the worker at once; a batch in flight rejects. */
  terminate(): Promise<void>;
}

/** The pool's side of a step worker's rolling loop. */
export interface GenerationChannel {
  /** Jobs taken from the pool's queue, for the loop to admit as it has room. */
  hand(jobs: readonly HandedJob[]): void;
  /** Jobs settled here (cancelled, timed out): the loop ends their sequences. */
  cancel(ids: readonly number[]): void;
  /** A job's reader is full, or has drained: its sequence waits meanwhile. */
  hold(id: number, held: boolean): void;
  /** Hears of each step: the tokens, the jobs that ended, the loop's figures. */
  onNews(listener: (news: GenerationNews) => void): void;
}
