import type {
  ChatMessage,
  GenerationDefaults,
  ResponseFormat,
  SerializedKilnError,
} from '@kiln/core';

/** What a tokenizer thread is started with: the model folder its tokenizer files are in. */
export interface TokenizerWorkerData {
  readonly dir: string;
}

export type TokenizerRequest =
  | { readonly type: 'encode'; readonly id: number; readonly text: string }
  | {
      readonly type: 'chat';
      readonly id: number;
      readonly messages: readonly ChatMessage[];
      readonly tools?: readonly unknown[];
    }
  /** Whether a response format compiles (answered with no tokens). */
  | { readonly type: 'check-format'; readonly id: number; readonly format: ResponseFormat };

/** What a model folder says of its chat template, when it has one. */
export interface ChatTemplateInfo {
  readonly bosToken?: string;
  readonly eosToken?: string;
  /** Whether the template reads a request's `tools`. */
  readonly usesTools: boolean;
}

/** What a tokenizer thread tells of its model once ready. */
export interface TokenizerFacts {
  readonly vocabSize: number;
  readonly eosTokenId: number | undefined;
  /** Every token that ends a sequence (eosTokenId and generation_config.json's). */
  readonly eosTokenIds: readonly number[];
  /** generation_config.json's defaults. */
  readonly generationDefaults: GenerationDefaults;
  readonly chatTemplate: ChatTemplateInfo | undefined;
}

export type TokenizerReply =
  | ({ readonly type: 'ready' } & TokenizerFacts)
  | { readonly type: 'start-failed'; readonly error: SerializedKilnError }
  | { readonly type: 'encoded'; readonly id: number; readonly tokens: Int32Array }
  | { readonly type: 'failed'; readonly id: number; readonly error: SerializedKilnError };
