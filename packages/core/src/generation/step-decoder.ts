import type { KilnError } from '../errors.js';
import type { SamplingParams } from './token-sampler.js';

/**
 * What the rolling-batch scheduler needs from a model: per-sequence state (its KV cache) and
 * one step over many sequences at once. Engine adapters implement it; the scheduler never
 * sees tensors.
 */
export interface StepDecoder<S = unknown> {
  readonly vocabSize: number;
  /** Longest sequence (prompt + output) the model can hold, e.g. its position embeddings. */
  readonly maxSequenceLength: number;
  /** Bytes of cache one token of one sequence takes, for accounting and metrics. */
  readonly cacheBytesPerToken: number;
  /** The token that ends a text, when the model says (Hugging Face `eos_token_id`). */
  readonly eosTokenId?: number | undefined;
  /**
   * What one more decode run costs, in padded cache positions (rows × positions), for a
   * decoder that pads the rows of a run to their longest past: the scheduler splits decoding
   * rows into runs of similar past where padding them together would cost more (see
   * groupByPast in `@kiln/batching`). Left out: every decode step is one run.
   */
  readonly decodeRunCost?: number | undefined;
  /**
   * Fresh state for a new sequence: nothing seen yet. `sequence` says how its tokens are to be
   * chosen, for a decoder that chooses them itself.
   */
  open(sequence?: SequenceSettings): S;
  /**
   * Feeds each entry's `tokens` after what its state has seen (a prompt chunk, or the last
   * generated token), extends its state, and answers for each entry, in entry order, the
   * logits of its last fed position — or the next token, when the model chose it itself.
   * Entries must not repeat a state. Entries of one `run` are computed together; the
   * scheduler decides which (a decoder without runs computes all at once).
   */
  step(entries: readonly StepEntry<S>[]): Promise<readonly StepOutput[]>;
  /** Frees a sequence's state; it is not used again. */
  release(state: S): void;
  /** Releases what the decoder holds (sessions, caches). */
  close?(): Promise<void>;
  /**
   * Calls `listener` once if the decoder can run no more steps while it is not closed (the
   * process holding the model died): its worker is then replaced.
   */
  onLost?(listener: (error: KilnError) => void): void;
}

/** What a step answers for an entry: the next token's logits, or the token the model chose. */
export type StepOutput = Float32Array | number;

export interface SequenceSettings {
  readonly sampling?: SamplingParams | undefined;
}

export interface StepEntry<S> {
  readonly state: S;
  readonly tokens: readonly number[];
  /**
   * The forward this entry is computed in: entries with the same number share one, as the
   * scheduler grouped them. Left out: the decoder's own grouping (decoding rows together,
   * prompt chunks together).
   */
  readonly run?: number | undefined;
}
