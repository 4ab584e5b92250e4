import type { NDList } from '@kiln/core';
import type { OrtProfile } from './profiling/ort-profile.js';
import type { SessionSignature } from './session-runner.js';

/** When ONNX Runtime itself ran, measured on the session's thread (no queueing or hops). */
export interface RunTiming {
  /** Start, in milliseconds since the epoch (comparable across threads). */
  readonly startedAt: number;
  readonly runMs: number;
}

/** Where a session lives: in this thread (SessionRunner) or in a worker thread of its own. */
export interface SessionHost extends SessionSignature {
  run(input: NDList): Promise<{ output: NDList; timing: RunTiming }>;
  endProfiling(options?: { skipRuns?: number }): Promise<OrtProfile>;
  close(): Promise<void>;
}
