import type { SerializedKilnError } from '@kiln/core';

/** What a tokenizer thread is started with: the model folder its tokenizer files are in. */
export interface TokenizerWorkerData {
  readonly dir: string;
}

export type TokenizerRequest =
  | { readonly type: 'encode'; readonly id: number; readonly text: string }
  /** The next generated token of each stream named, in order; answered by one `decoded`. */
  | { readonly type: 'decode'; readonly id: number; readonly tokens: readonly StreamToken[] }
  /** No answer: the stream's held tokens are forgotten. */
  | { readonly type: 'end'; readonly stream: number };

export interface StreamToken {
  readonly stream: number;
  readonly token: number;
}

export type TokenizerReply =
  | { readonly type: 'ready'; readonly vocabSize: number; readonly eosTokenId: number | undefined }
  | { readonly type: 'start-failed'; readonly error: SerializedKilnError }
  | { readonly type: 'encoded'; readonly id: number; readonly tokens: Int32Array }
  /** Each token's text, in the order asked. */
  | { readonly type: 'decoded'; readonly id: number; readonly texts: readonly string[] }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedKilnError };
