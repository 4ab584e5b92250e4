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
  /** Runs the model once on a (possibly batched) input. Never blocks the calling event loop. */
  forward(input: NDList, options?: ForwardOptions): Promise<NDList>;
  /** Releases the context (worker thread, native handle). Idempotent. */
  close(): Promise<void>;
}
