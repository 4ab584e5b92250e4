import {
  KilnError,
  KilnErrorCode,
  type StepDecoder,
  type TextTokenizer,
  TokenSampler,
  TokenTextStream,
  topLogprobs,
} from '@kiln/core';
import type {
  StepModelInfo,
  StepReply,
  StepRequest,
  StepRunner,
  TokenAlternatives,
} from './step-protocol.js';

interface Sequence<S> {
  readonly state: S;
  readonly sampler: TokenSampler;
  /** Every token fed so far (prompt and output): the repetition penalty's history. */
  readonly history: number[];
  readonly text: TokenTextStream | undefined;
  readonly logprobs: boolean;
  /** How many of each step's most likely tokens to list (with logprobs). */
  readonly topLogprobs: number;
}

/**
 * The model's side of rolling batching: runs steps of a StepDecoder next to it, keeping per
 * sequence its decoder state, its sampler and its streaming detokenizer, so that only the
 * chosen tokens leave. A step worker's thread runs one; tests run one on their own thread.
 */
export class SequenceStepper<S = unknown> implements StepRunner {
  private readonly sequences = new Map<number, Sequence<S>>();

  constructor(
    private readonly decoder: StepDecoder<S>,
    private readonly tokenizer?: TextTokenizer,
  ) {}

  get info(): StepModelInfo {
    return {
      vocabSize: this.decoder.vocabSize,
      maxSequenceLength: this.decoder.maxSequenceLength,
      cacheBytesPerToken: this.decoder.cacheBytesPerToken,
      eosTokenId: this.tokenizer?.eosTokenId ?? this.decoder.eosTokenId,
    };
  }

  async step(request: StepRequest): Promise<StepReply> {
    const started = performance.now();
    for (const seq of request.releases) this.release(seq);
    for (const { seq, sampling, logprobs, topLogprobs } of request.opens) {
      this.sequences.set(seq, {
        state: this.decoder.open({ sampling }),
        sampler: new TokenSampler(sampling ?? {}),
        history: [],
        text: this.tokenizer && new TokenTextStream(this.tokenizer),
        logprobs: logprobs ?? false,
        topLogprobs: topLogprobs ?? 0,
      });
    }
    const fed = request.entries.map((entry) => {
      const sequence = this.sequences.get(entry.seq);
      if (!sequence)
        throw new KilnError(KilnErrorCode.Internal, `sequence ${entry.seq} is not open`);
      sequence.history.push(...entry.tokens);
      return sequence;
    });
    const outputs =
      fed.length === 0
        ? []
        : await this.decoder.step(
            fed.map((s, i) => ({ state: s.state, tokens: request.entries[i]!.tokens })),
          );
    const sampled = request.entries.filter((e) => e.sample).length;
    const tokens = new Int32Array(sampled);
    const texts: string[] = [];
    const logprobs = fed.some((s, i) => s.logprobs && request.entries[i]!.sample)
      ? new Float64Array(sampled).fill(NaN)
      : undefined;
    const alternatives: (TokenAlternatives | undefined)[] | undefined = logprobs && [];
    let k = 0;
    request.entries.forEach((entry, i) => {
      if (!entry.sample) return;
      const sequence = fed[i]!;
      const output = outputs[i]!;
      // A decoder that chose the token itself gives no logits: no log-probability either.
      const token =
        typeof output === 'number' ? output : sequence.sampler.next(output, sequence.history);
      tokens[k] = token;
      texts.push(sequence.text?.push(token) ?? '');
      if (logprobs && sequence.logprobs && typeof output !== 'number') {
        logprobs[k] = logSoftmaxAt(output, token);
        alternatives![k] = this.alternatives(output, token, sequence.topLogprobs);
      }
      k++;
    });
    return { tokens, texts, logprobs, alternatives, hostMs: performance.now() - started };
  }

  /** A token's own text and the step's `k` most likely tokens, with theirs (never the logits). */
  private alternatives(logits: Float32Array, token: number, k: number): TokenAlternatives {
    const text = (id: number) => this.tokenizer?.decode([id]) ?? '';
    return {
      text: text(token),
      top: topLogprobs(logits, k).map((t) => ({ ...t, text: text(t.token) })),
    };
  }

  /** Frees every sequence and the decoder. */
  async close(): Promise<void> {
    for (const seq of [...this.sequences.keys()]) this.release(seq);
    await this.decoder.close?.();
  }

  private release(seq: number): void {
    const sequence = this.sequences.get(seq);
    if (!sequence) return;
    this.sequences.delete(seq);
    this.decoder.release(sequence.state);
  }
}

/** log(softmax(logits)[token]), computed stably. */
function logSoftmaxAt(logits: Float32Array, token: number): number {
  let max = -Infinity;
  for (const x of logits) if (x > max) max = x;
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  return logits[token]! - max - Math.log(sum);
}
