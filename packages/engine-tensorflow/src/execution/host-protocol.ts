import { KilnError, KilnErrorCode, type NDListMessage, type SerializedKilnError } from '@kiln/core';
import type { TfModelSpec } from '../model/load-model.js';
import type { TfModelFormat, TfTensorSpec } from '../model/loaded-model.js';
import type { TfBackendName } from '../runtime/backends.js';
import type { TfRuntimeFacts } from '../runtime/resolve-runtime.js';
import type { TfMemoryInfo } from '../runtime/tfjs-api.js';

/** What a host thread is started with. */
export interface HostConfig {
  /** Backends to try, best first. */
  readonly backends: readonly TfBackendName[];
}

/** A model as loaded in a host: its handle there and what it reported. */
export interface HostedModelFacts {
  readonly handle: number;
  readonly format: TfModelFormat;
  readonly inputs: readonly TfTensorSpec[];
  readonly outputs: readonly TfTensorSpec[];
  readonly facts: Readonly<Record<string, unknown>>;
}

export type HostRequest =
  | { readonly id: number; readonly op: 'load'; readonly spec: TfModelSpec }
  | {
      readonly id: number;
      readonly op: 'forward';
      readonly handle: number;
      readonly inputs: NDListMessage;
    }
  | { readonly id: number; readonly op: 'unload'; readonly handle: number }
  | { readonly id: number; readonly op: 'memory' };

/** What each request answers with when it succeeds. */
export interface HostReplies {
  load: HostedModelFacts;
  forward: NDListMessage;
  unload: null;
  memory: TfMemoryInfo;
}

export type HostReply =
  | { readonly id: number; readonly ok: true; readonly value: HostReplies[HostRequest['op']] }
  | { readonly id: number; readonly ok: false; readonly error: SerializedKilnError };

/** The host's first message: its runtime is ready, or it could not start one. */
export type HostStatus =
  | { readonly status: 'ready'; readonly facts: TfRuntimeFacts }
  | { readonly status: 'failed'; readonly error: SerializedKilnError };

/** Any error as a KilnError that survives postMessage. */
export function serializeError(error: unknown, code: KilnErrorCode): SerializedKilnError {
  return KilnError.wrap(error, code).toJSON();
}

export const HOST_ERROR_CODE: Readonly<Record<HostRequest['op'], KilnErrorCode>> = {
  load: KilnErrorCode.ModelLoadFailed,
  forward: KilnErrorCode.EngineError,
  unload: KilnErrorCode.Internal,
  memory: KilnErrorCode.Internal,
};
