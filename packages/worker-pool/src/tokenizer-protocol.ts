import type { SerializedKilnError } from '@kiln/core';

/** What a tokenizer thread is started with: the model folder its tokenizer files are in. */
export interface TokenizerWorkerData {
  readonly dir: string;
}

export type TokenizerRequest = {
  readonly type: 'encode';
  readonly id: number;
  readonly text: string;
};

export type TokenizerReply =
  | { readonly type: 'ready'; readonly vocabSize: number; readonly eosTokenId: number | undefined }
  | { readonly type: 'start-failed'; readonly error: SerializedKilnError }
  | { readonly type: 'encoded'; readonly id: number; readonly tokens: Int32Array }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedKilnError };
