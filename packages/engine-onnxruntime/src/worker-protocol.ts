import type { SerializedKilnError, TensorDescriptor } from '@kiln/core';
import type { OrtProfile } from './profiling/ort-profile.js';
import type { RunTiming } from './session-host.js';
import type { OrtSessionConfig } from './session-config.js';
import type { WireTensor } from './ort-tensors.js';

/** What a session worker starts with. */
export interface SessionWorkerData {
  readonly modelPath: string;
  readonly config: OrtSessionConfig;
}

/** Requests from the owning thread; each carries an id its answer repeats. */
export type SessionRequest =
  | { readonly type: 'run'; readonly id: number; readonly inputs: readonly WireTensor[] }
  | { readonly type: 'end-profiling'; readonly id: number; readonly skipRuns: number }
  | { readonly type: 'close'; readonly id: number };

export type SessionReply =
  | {
      readonly type: 'ready';
      readonly inputs: readonly TensorDescriptor[];
      readonly outputs: readonly TensorDescriptor[];
    }
  | { readonly type: 'start-failed'; readonly error: SerializedKilnError }
  | {
      readonly type: 'outputs';
      readonly id: number;
      readonly outputs: readonly WireTensor[];
      readonly timing: RunTiming;
      /** The request's input buffers, handed back so the owner can fill them again. */
      readonly inputBuffers: readonly ArrayBuffer[];
    }
  | { readonly type: 'profile'; readonly id: number; readonly profile: OrtProfile }
  | { readonly type: 'closed'; readonly id: number }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedKilnError };
