import {
  KilnError,
  KilnErrorCode,
  ResponseGrammars,
  type StepDecoder,
  type TokenConstraint,
  type StepOutput,
  type TextTokenizer,
  TokenSampler,
  TokenTextStream,
  topLogprobs,
} from '@kiln/core';
import type {
  SequenceFailure,
  SequenceOpen,
  StepModelInfo,
  StepReply,
  StepRequest,
  StepRunner,
  TokenAlternatives,
} from './step-protocol.js';

interface Sequence<S> {
  readonly seq: number;
  readonly state: S;
  readonly sampler: TokenSampler;
  /** Every token fed so far (prompt and output): the repetition penalty's history. */
  readonly history: number[];
  readonly text: TokenTextStream | undefined;
  readonly logprobs: boolean;
  /** How many of each step's most likely tokens to list (with logprobs). */
  readonly topLogprobs: number;
  /** Its response format's grammar: only the tokens it allows are chosen. */
  readonly constraint: TokenConstraint | undefined;
}

interface Chosen {
  readonly token: number;
  readonly text: string;
  readonly logprob: number | undefined;
  readonly alternatives: TokenAlternatives | undefined;
}

/**
 * The model's side of rolling batching: runs steps of a StepDecoder next to it, keeping per
 * sequence its decoder state, its sampler and its streaming detokenizer, so that only the
 * chosen tokens leave. A step worker's thread runs one; tests run one on their own thread.
 */
export class SequenceStepper<S = unknown> implements StepRunner {
  private readonly sequences = new Map<number, Sequence<S>>();
  /** Response formats compiled for this tokenizer, made on the first that asks. */
  private grammars: ResponseGrammars | undefined;

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
      decodeRunCost: this.decoder.decodeRunCost,
    };
  }

  async step(request: StepRequest): Promise<StepReply> {
    const started = performance.now();
    for (const seq of request.releases) this.release(seq);
    const failures: SequenceFailure[] = [];
    const fail = (seq: number, error: unknown) => {
      failures.push({ seq, error: KilnError.wrap(error, KilnErrorCode.Internal).toJSON() });
      this.release(seq);
    };
    for (const open of request.opens) {
      try {
        await this.open(open);
      } catch (error) {
        fail(open.seq, error);
      }
    }
    const failed = (seq: number) => failures.some((f) => f.seq === seq);
    const fed = request.entries.map((entry) => {
      const sequence = this.sequences.get(entry.seq);
      if (!sequence && !failed(entry.seq))
        throw new KilnError(KilnErrorCode.Internal, `sequence ${entry.seq} is not open`);
      return sequence;
    });
    const chosen: (Chosen | undefined)[] = new Array(fed.length);
    const now = fed.flatMap((sequence, i) => (sequence ? [i] : []));
    for (const i of now) fed[i]!.history.push(...request.entries[i]!.tokens);
    if (now.length > 0) {
      const outputs = await this.decoder.step(
        now.map((i) => {
          const { tokens, run } = request.entries[i]!;
          return { state: fed[i]!.state, tokens, run };
        }),
      );
      for (const [j, i] of now.entries()) {
        const sequence = fed[i]!;
        if (!request.entries[i]!.sample) continue;
        try {
          chosen[i] = await this.choose(sequence, outputs[j]!);
        } catch (error) {
          fail(sequence.seq, error);
        }
      }
    }
    const sampled = request.entries.flatMap((entry, i) => (entry.sample ? [i] : []));
    const tokens = new Int32Array(sampled.length);
    const texts: string[] = [];
    const logprobs = sampled.some((i) => fed[i]?.logprobs)
      ? new Float64Array(sampled.length).fill(NaN)
      : undefined;
    const alternatives: (TokenAlternatives | undefined)[] | undefined = logprobs && [];
    sampled.forEach((i, k) => {
      const choice = chosen[i];
      if (!choice || failed(request.entries[i]!.seq)) {
        tokens[k] = -1;
        texts.push('');
        return;
      }
      tokens[k] = choice.token;
      texts.push(choice.text);
      if (logprobs && choice.logprob !== undefined) {
        logprobs[k] = choice.logprob;
        alternatives![k] = choice.alternatives;
      }
    });
    const hostMs = performance.now() - started;
    return {
      tokens,
      texts,
      logprobs,
      alternatives,
      hostMs,
      decodeRunCost: this.decoder.decodeRunCost,
      ...(failures.length > 0 ? { failures } : {}),
    };
  }

  /** Starts a sequence: its decoder state, sampler, detokenizer and response format. */
  private async open(open: SequenceOpen): Promise<void> {
    const constraint = open.responseFormat
      ? await this.responseGrammars().constraint(open.responseFormat)
      : undefined;
    this.sequences.set(open.seq, {
      seq: open.seq,
      state: this.decoder.open({ sampling: open.sampling }),
      sampler: new TokenSampler(open.sampling ?? {}),
      history: [],
      text: this.tokenizer && new TokenTextStream(this.tokenizer),
      logprobs: open.logprobs ?? false,
      topLogprobs: open.topLogprobs ?? 0,
      constraint,
    });
  }

  /**
   * Builds what response formats need for this tokenizer (XGrammar's view of the vocabulary:
   * about a second at 32k tokens) now rather than on the first request that asks; nothing
   * when the tokenizer cannot tell its tokens' text.
   */
  async prepareResponseFormats(): Promise<void> {
    if (!this.tokenizer?.grammarVocabulary) return;
    try {
      await this.responseGrammars().prepare();
    } catch {
      // A model that cannot take response formats (no end token, say) serves all else; a
      // request asking for one hears why.
    }
  }

  private responseGrammars(): ResponseGrammars {
    if (this.grammars) return this.grammars;
    const vocabulary = this.tokenizer?.grammarVocabulary?.();
    if (!vocabulary)
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        "response_format needs the model's tokenizer, and this model has none that can tell its tokens' text",
        { details: { param: 'response_format' } },
      );
    const { eosTokenId, eosTokenIds } = this.tokenizer!;
    const ends = eosTokenIds ?? (eosTokenId === undefined ? [] : [eosTokenId]);
    return (this.grammars = new ResponseGrammars(vocabulary, this.decoder.vocabSize, ends));
  }

  /**
   * Samples a sequence's next token from its logits (or takes the one its decoder chose),
   * among those its response format allows.
   */
  private async choose(sequence: Sequence<S>, output: StepOutput): Promise<Chosen> {
    const { constraint } = sequence;
    const allowed = constraint && (await constraint.allowed());
    // A decoder that chose the token itself gives no logits: no log-probability either.
    const token =
      typeof output === 'number'
        ? output
        : sequence.sampler.next(output, sequence.history, allowed);
    if (allowed && !constraint.accept(token))
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        "the model's step handler chose a token response_format does not allow: it chooses its own tokens, so Kiln cannot constrain them",
        { details: { param: 'response_format' } },
      );
    const asked = sequence.logprobs && typeof output !== 'number';
    return {
      token,
      text: sequence.text?.push(token) ?? '',
      ...(asked
        ? this.logprobsOf(output, token, sequence.topLogprobs)
        : { logprob: undefined, alternatives: undefined }),
    };
  }

  /** A token's own text and the step's `k` most likely tokens, with theirs (never the logits). */
  /**
   * A chosen token's log-probability, its own text and the step's `k` most likely tokens with
   * theirs (never the logits). With a top list, its pass over the vocabulary gives the
   * normalizer too: the chosen token's value is then computed as logSoftmaxAt would.
   */
  private logprobsOf(
    logits: Float32Array,
    token: number,
    k: number,
  ): { logprob: number; alternatives: TokenAlternatives } {
    const text = (id: number) => this.tokenizer?.decode([id]) ?? '';
    const top = topLogprobs(logits, k);
    const best = top[0];
    // best.logprob is -log(sum), exactly: (x - max) - log(sum) as logSoftmaxAt rounds it.
    const logprob = best
      ? logits[token]! - logits[best.token]! + best.logprob
      : logSoftmaxAt(logits, token);
    return {
      logprob,
      alternatives: { text: text(token), top: top.map((t) => ({ ...t, text: text(t.token) })) },
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
    sequence.constraint?.dispose();
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
