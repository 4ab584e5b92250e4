import type { NDList } from '../tensor/ndlist.js';

export interface ForwardOptions {
  /** Aborts work that has not started; engines may also stop running work. */
  signal?: AbortSignal;
}

/**
 * One execution context of a model (Triton's model instance): at most one forward in flight.
 * Engines implement this; Predictors own one each.
 */
export interface ExecutionContext {
  /**
   * Runs the model once on a (possibly batched) input. It may block the calling thread while
   * the model computes when its provider declares `execution: 'blocking'`: the worker pool
   * runs those contexts on threads of their own.
   */
  forward(input: NDList, options?: ForwardOptions): Promise<NDList>;
  /**
   * Ends the engine's per-operator profile (models loaded with profiling on) and returns its
   * tables, leaving out the first `skipRuns` runs. Engines without profiling leave it out.
   */
  endProfiling?(options?: { skipRuns?: number }): Promise<unknown>;
  /**
   * The cores this context pinned its compute threads to (`cpuCores` honoured); undefined
   * when it was not asked to or its engine cannot pin.
   */
  readonly pinnedCores?: readonly number[] | undefined;
  /** Releases the context (worker thread, native handle). Idempotent. */
  close(): Promise<void>;
}
