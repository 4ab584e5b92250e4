import type { ResponseFormat, SamplingParams, SerializedKilnError } from '@kiln/core';
import type { TopLogprob } from './generation-job.js';

/**
 * What a rolling loop and the step worker holding the model say to each other each step:
 * only token ids, text pieces and, when asked, log-probabilities; the logits stay with the
 * model. Sequences are named by numbers the loop hands out.
 */
export interface StepRequest {
  /** Sequences to start: how each one's tokens are chosen. */
  readonly opens: readonly SequenceOpen[];
  /** What to feed this step, in order; an entry that samples gets a token back. */
  readonly entries: readonly SequenceEntry[];
  /** Sequences that ended since the last step: their caches are freed. */
  readonly releases: readonly number[];
}

export interface SequenceOpen {
  readonly seq: number;
  readonly sampling?: SamplingParams | undefined;
  readonly logprobs?: boolean | undefined;
  /** How many of the most likely tokens each step lists (with `logprobs`). */
  readonly topLogprobs?: number | undefined;
  /** The shape its text must take: only tokens that keep to it are chosen. */
  readonly responseFormat?: ResponseFormat | undefined;
}

export interface SequenceEntry {
  readonly seq: number;
  /** A chunk of the prompt, or the last generated token. */
  readonly tokens: readonly number[];
  /** Choose the next token after these (the prompt's last chunk, or a decoding step). */
  readonly sample: boolean;
  /** The forward it is computed in: entries of one run share one (the loop's grouping). */
  readonly run?: number | undefined;
}

export interface StepReply {
  /** The token chosen for each entry that sampled, in entry order. */
  readonly tokens: Int32Array;
  /** The text each of those tokens completes ('' while a UTF-8 character is split). */
  readonly texts: readonly string[];
  /** Each chosen token's log-probability (NaN where its sequence did not ask); none when none asked. */
  readonly logprobs: Float64Array | undefined;
  /**
   * For each token whose sequence asked for log-probabilities: its own text and the step's
   * most likely tokens; none when none asked.
   */
  readonly alternatives?: readonly (TokenAlternatives | undefined)[];
  /** The step's time on the worker's thread. */
  readonly hostMs: number;
  /** What one more decode run costs now, as the model learned it (StepDecoder.decodeRunCost). */
  readonly decodeRunCost?: number | undefined;
  /**
   * Sequences that failed on their own in this step (a response format that cannot be
   * compiled, a token their grammar refuses): they are closed, and their entries' tokens are
   * -1. The other sequences went on.
   */
  readonly failures?: readonly SequenceFailure[];
}

export interface SequenceFailure {
  readonly seq: number;
  readonly error: SerializedKilnError;
}

/** A chosen token's own text and the step's most likely tokens, for log-probabilities. */
export interface TokenAlternatives {
  readonly text: string;
  readonly top: readonly TopLogprob[];
}

/** What a step worker reports of its model once it is ready. */
export interface StepModelInfo {
  readonly vocabSize: number;
  readonly maxSequenceLength: number;
  readonly cacheBytesPerToken: number;
  readonly eosTokenId: number | undefined;
  /** What one more decode run costs, in padded positions; none: one run a step. */
  readonly decodeRunCost?: number | undefined;
}

/** Runs steps where the model is (a step worker's thread, or this one in tests). */
export interface StepRunner {
  step(request: StepRequest): Promise<StepReply>;
}
