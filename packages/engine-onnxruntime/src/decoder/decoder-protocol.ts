import type { SerializedKilnError } from '@kiln/core';
import type { OrtSessionConfig } from '../options.js';
import type { DecoderSignature } from './decoder-signature.js';
import type { KvStepEntry } from './kv-batch-runner.js';

export interface DecoderWorkerData {
  readonly modelPath: string;
  readonly config: OrtSessionConfig;
  readonly maxSequenceLength: number;
  /** See OrtStepDecoderOptions.decodeRunCost; estimated from the model file when absent. */
  readonly decodeRunCost?: number;
}

export type DecoderRequest =
  | { readonly type: 'step'; readonly id: number; readonly entries: readonly KvStepEntry[] }
  /** No answer: later steps simply no longer see the sequence. */
  | { readonly type: 'release'; readonly sequence: number }
  | { readonly type: 'close'; readonly id: number };

export type DecoderReply =
  | { readonly type: 'ready'; readonly signature: DecoderSignature }
  | { readonly type: 'start-failed'; readonly error: SerializedKilnError }
  | {
      readonly type: 'logits';
      readonly id: number;
      /** Entry after entry, vocab values each. */
      readonly logits: Float32Array;
      readonly allocatedFloats: number;
      /** The whole step on the worker. */
      readonly runMs: number;
      /** ONNX Runtime's runs within it. */
      readonly sessionMs: number;
    }
  | { readonly type: 'closed'; readonly id: number }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedKilnError };
