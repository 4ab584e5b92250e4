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
  /** When it surely ends (see SequenceOpen): no step is taken ahead past it. */
  readonly maxNewTokens: number | undefined;
  readonly endTokens: ReadonlySet<number>;
  /** Its response format's grammar: only the tokens it allows are chosen. */
  readonly constraint: TokenConstraint | undefined;
  /** Tokens chosen so far, those chosen ahead included, and the last of them. */
  generated: number;
  last: number | undefined;
  /** Its next step, taken ahead of the request for it (lookAhead). */
  ahead: Ahead | undefined;
}

/** A step taken ahead for one sequence: the token it fed, and what it chose. */
interface Ahead {
  readonly fed: number;
  readonly chosen: Chosen | undefined;
  readonly error: unknown;
  /** The whole look-ahead step's time on this thread, and when it ended. */
  readonly ms: number;
  readonly endedAt: number;
}

interface Chosen {
  readonly token: number;
  readonly text: string;
  readonly logprob: number | undefined;
  readonly alternatives: TokenAlternatives | undefined;
}

export interface SequenceStepperOptions {
  /**
   * Take each decoding sequence's next step as soon as a step is answered, feeding the token
   * it just chose, so the decoder works while the answer crosses to the rolling loop and its
   * next request comes back; that request is then answered from what was computed ahead. A
   * sequence the loop ends meanwhile (a stop string, a cancel) wastes that one step; none is
   * taken past its max_new_tokens or its end tokens. For a stepper on a thread of its own.
   */
  readonly lookAhead?: boolean;
}

/**
 * The model's side of rolling batching: runs steps of a StepDecoder next to it, keeping per
 * sequence its decoder state, its sampler and its streaming detokenizer, so that only the
 * chosen tokens leave. A step worker's thread runs one; tests run one on their own thread.
 */
export class SequenceStepper<S = unknown> implements StepRunner {
  private readonly sequences = new Map<number, Sequence<S>>();
  /** The look-ahead step under way, if any; settles without rejecting. */
  private ahead: Promise<void> = Promise.resolve();
  /** Starts the step taken ahead that waits for its turn. */
  private startPending: (() => void) | undefined;
  /** Response formats compiled for this tokenizer, made on the first that asks. */
  private grammars: ResponseGrammars | undefined;

  constructor(
    private readonly decoder: StepDecoder<S>,
    private readonly tokenizer?: TextTokenizer,
    private readonly options: SequenceStepperOptions = {},
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
    await this.ahead;
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
    // Entries whose step was taken ahead are answered from it; the others run now.
    const chosen: (Chosen | undefined)[] = new Array(fed.length);
    const now: number[] = [];
    let aheadMs = 0;
    let aheadEnded = 0;
    request.entries.forEach((entry, i) => {
      const sequence = fed[i];
      if (!sequence) return;
      const ahead = sequence.ahead;
      sequence.ahead = undefined;
      if (!ahead) {
        sequence.history.push(...entry.tokens);
        now.push(i);
        return;
      }
      if (!entry.sample || entry.tokens.length !== 1 || entry.tokens[0] !== ahead.fed)
        throw new KilnError(KilnErrorCode.Internal, `sequence ${entry.seq} was fed out of turn`);
      if (ahead.error !== undefined) fail(sequence.seq, ahead.error);
      else chosen[i] = ahead.chosen;
      aheadMs = Math.max(aheadMs, ahead.ms);
      aheadEnded = Math.max(aheadEnded, ahead.endedAt);
    });
    if (now.length > 0) {
      const outputs = await this.decoder.step(
        now.map((i) => ({ state: fed[i]!.state, tokens: request.entries[i]!.tokens })),
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
    if (this.options.lookAhead)
      this.stepAhead(sampled.flatMap((i) => (failed(request.entries[i]!.seq) ? [] : [fed[i]!])));
    // A step answered from one taken ahead counts that step's time as its own, once: not
    // again the part of it this request waited for.
    const hostMs = aheadMs + performance.now() - Math.max(started, aheadEnded);
    return {
      tokens,
      texts,
      logprobs,
      alternatives,
      hostMs,
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
      maxNewTokens: open.maxNewTokens,
      endTokens: new Set(open.endTokens ?? []),
      constraint,
      generated: 0,
      last: undefined,
      ahead: undefined,
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
    sequence.generated++;
    sequence.last = token;
    const asked = sequence.logprobs && typeof output !== 'number';
    return {
      token,
      text: sequence.text?.push(token) ?? '',
      ...(asked
        ? this.logprobsOf(output, token, sequence.topLogprobs)
        : { logprob: undefined, alternatives: undefined }),
    };
  }

  /**
   * Once this step's answer is on its way, takes the next step of the sequences that just
   * chose a token and surely go on, each fed that token: at `startAhead()`, called once the
   * answer is sent, or else on the next turn of the event loop.
   */
  private stepAhead(sequences: Sequence<S>[]): void {
    const next = sequences.flatMap((sequence) => {
      const last = sequence.last;
      if (last === undefined || sequence.endTokens.has(last)) return [];
      if (sequence.maxNewTokens !== undefined && sequence.generated >= sequence.maxNewTokens)
        return [];
      return [{ sequence, fed: last }];
    });
    if (next.length === 0) return;
    let start!: () => void;
    const started = new Promise<void>((resolve) => (start = resolve));
    this.startPending = start;
    setImmediate(start);
    this.ahead = started.then(() => this.runAhead(next));
  }

  /**
   * Starts the step taken ahead, if one waits: a step worker's thread calls it right after it
   * posts an answer, so the step runs while the answer crosses and the next request comes.
   */
  startAhead(): void {
    const start = this.startPending;
    this.startPending = undefined;
    start?.();
  }

  private async runAhead(next: { sequence: Sequence<S>; fed: number }[]): Promise<void> {
    this.startPending = undefined;
    // Released (ended by the loop) before the step could start: nothing to take.
    const live = next.filter(({ sequence }) => this.sequences.get(sequence.seq) === sequence);
    if (live.length === 0) return;
    const started = performance.now();
    for (const { sequence, fed } of live) sequence.history.push(fed);
    let outputs: readonly StepOutput[];
    try {
      outputs = await this.decoder.step(
        live.map(({ sequence, fed }) => ({ state: sequence.state, tokens: [fed] })),
      );
    } catch (error) {
      // The request for these steps fails as the step itself would have.
      const endedAt = performance.now();
      for (const { sequence, fed } of live)
        sequence.ahead = { fed, chosen: undefined, error, ms: endedAt - started, endedAt };
      return;
    }
    const chosen: (Chosen | undefined)[] = [];
    const errors: unknown[] = [];
    for (const [j, { sequence }] of live.entries()) {
      try {
        chosen.push(await this.choose(sequence, outputs[j]!));
        errors.push(undefined);
      } catch (error) {
        // Its own failure (a response format): the others' steps stand.
        chosen.push(undefined);
        errors.push(error);
      }
    }
    const endedAt = performance.now();
    const ms = endedAt - started;
    live.forEach(({ sequence, fed }, j) => {
      sequence.ahead = { fed, chosen: chosen[j], error: errors[j], ms, endedAt };
    });
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
    await this.ahead;
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
