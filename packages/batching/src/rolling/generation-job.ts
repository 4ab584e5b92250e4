import type { ResponseFormat, SamplingParams } from '@kiln/core';

/** What a text-generation (step) pool's jobs carry: a tokenized prompt and how to continue it. */
export interface GenerationJob {
  readonly promptTokens: readonly number[];
  readonly maxNewTokens: number;
  readonly sampling?: SamplingParams;
  /** Stop strings, checked on the text: the first one found ends the job, and is never shown. */
  readonly stop?: readonly string[];
  /** Whether each chunk carries the log-probability of its token. */
  readonly logprobs?: boolean;
  /**
   * How many of each step's most likely tokens a chunk lists with their log-probabilities
   * (0 to 20, as OpenAI's `top_logprobs`); computed next to the model, with `logprobs`.
   */
  readonly topLogprobs?: number;
  /** Generate max_new_tokens even past the end-of-sequence token (benchmarks, as vLLM's). */
  readonly ignoreEos?: boolean;
  /**
   * Tokens that end this job besides the model's end-of-sequence token, as the end of a
   * sequence (generation_config.json's `eos_token_id` list: an end-of-turn token, say).
   */
  readonly eosTokenIds?: readonly number[];
  /**
   * The shape the text must take (OpenAI's `response_format`): the sampler chooses only tokens
   * that keep to it, so a job that ends at its end token answers JSON that parses (and
   * validates against the schema).
   */
  readonly responseFormat?: ResponseFormat;
}

/** One generated token, streamed through `JobOptions.onChunk` as soon as it is chosen. */
export interface GenerationChunk {
  readonly token: number;
  /** The text it adds that may be shown now ('' while a character or a stop string is held). */
  readonly text: string;
  /**
   * Its place among the generated tokens, from 0. A job ending at its end-of-sequence token
   * may send one more chunk repeating the last token and index, with the text it held back
   * for a stop string that never came.
   */
  readonly index: number;
  /** Natural log of its probability under the model's logits, when the job asked. */
  readonly logprob?: number;
  /** The token's own text, when the job asked for log-probabilities. */
  readonly tokenText?: string;
  /** The step's most likely tokens, most likely first, when the job asked for them. */
  readonly topLogprobs?: readonly TopLogprob[];
}

/** One of a step's most likely tokens: its id, its own text and its log-probability. */
export interface TopLogprob {
  readonly token: number;
  readonly text: string;
  readonly logprob: number;
}

export type FinishReason = 'length' | 'stop' | 'eos' | 'cancelled';

export interface GenerationOutput {
  /** The generated text, without the prompt and without a stop string. */
  readonly text: string;
  readonly tokens: readonly number[];
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  /** From submission to the first token; undefined when none came. */
  readonly timeToFirstTokenMs: number | undefined;
  /** Gaps between consecutive tokens. */
  readonly interTokenMs: readonly number[];
}
