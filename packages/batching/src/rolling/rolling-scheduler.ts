import {
  KilnError,
  KilnErrorCode,
  type SamplingParams,
  type StepDecoder,
  type StepEntry,
  TokenSampler,
} from '@kiln/core';
import { type Clock, systemClock } from '../clock.js';
import type { FinishReason } from './generation-job.js';

import {
  DEFAULT_MAX_ROLLING_BATCH_PREFILL_TOKENS,
  DEFAULT_MAX_ROLLING_BATCH_SIZE,
} from './rolling-loop.js';

export interface RollingSchedulerOptions {
  /** Most sequences decoding at once (`option.max_rolling_batch_size`). */
  readonly maxBatchSize?: number;
  /** Most prompt tokens fed in one step (`option.max_rolling_batch_prefill_tokens`). */
  readonly maxPrefillTokens?: number;
  /**
   * Cache budget in tokens over all active sequences. A sequence reserves prompt + max new
   * tokens when admitted, so a running one never runs out; others wait. Default: the
   * batch size times the model's longest sequence.
   */
  readonly maxCacheTokens?: number;
  /** Most requests waiting for a slot; more are refused with QUEUE_FULL. Default 1000. */
  readonly maxWaiting?: number;
  readonly clock?: Clock;
}

export interface GenerationRequest {
  readonly promptTokens: readonly number[];
  readonly maxNewTokens: number;
  readonly sampling?: SamplingParams;
  /** Ends the sequence when generated (not emitted). */
  readonly eosTokenId?: number;
  /** Ends the sequence after the token that makes this true (e.g. a stop string matched). */
  readonly isStop?: (generated: readonly number[]) => boolean;
  /** Aborting removes the sequence at the next step and frees its slot. */
  readonly signal?: AbortSignal;
  /**
   * Called with each new token as soon as it is chosen. A promise (its text decoded on another
   * thread) holds the sequence's next step, and `isStop`, until it settles; a rejected one
   * fails the sequence.
   */
  readonly onToken?: (token: number, index: number) => unknown;
}

export interface GenerationResult {
  readonly tokens: readonly number[];
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  /** From submission to the first token; undefined when none came. */
  readonly timeToFirstTokenMs: number | undefined;
  /** Gaps between consecutive tokens. */
  readonly interTokenMs: readonly number[];
}

export interface RollingSchedulerStats {
  readonly active: number;
  readonly waiting: number;
  readonly cacheTokensReserved: number;
  readonly cacheTokensBudget: number;
  readonly cacheTokensUsed: number;
  readonly cacheBytesUsed: number;
  readonly steps: number;
  readonly tokensGenerated: number;
}

/** Called after each step, e.g. to update metrics. */
export type StepListener = (step: {
  readonly sequences: number;
  readonly prefillTokens: number;
  readonly ms: number;
}) => void;

interface Sequence<S> {
  readonly request: GenerationRequest;
  readonly sampler: TokenSampler;
  readonly history: number[];
  readonly generated: number[];
  readonly reserved: number;
  readonly submittedAt: number;
  readonly interTokenMs: number[];
  readonly resolve: (result: GenerationResult) => void;
  readonly reject: (error: unknown) => void;
  state?: S;
  /** Prompt tokens already fed. */
  fed: number;
  lastTokenAt?: number;
  firstTokenMs?: number;
}

/**
 * Iteration-level ("rolling", "continuous") batching, as in Orca, vLLM and DJL's LMI: one
 * decode loop per model. Every step it admits waiting requests while slots and cache budget
 * allow, feeds each decoding sequence its last token and prefilling sequences a chunk of
 * their prompt (at most `maxPrefillTokens` prompt tokens per step, so a long prompt cannot
 * stall running decodes), streams each new token, and retires finished sequences at once.
 */
export class RollingScheduler<S = unknown> {
  readonly maxBatchSize: number;
  readonly maxPrefillTokens: number;
  readonly maxCacheTokens: number;
  private readonly maxWaiting: number;
  private readonly clock: Clock;
  private readonly waiting: Sequence<S>[] = [];
  private readonly active: Sequence<S>[] = [];
  private readonly stepListeners = new Set<StepListener>();
  private idleWaiters: (() => void)[] = [];
  private reserved = 0;
  private running = false;
  private closed = false;
  private steps = 0;
  private tokensGenerated = 0;

  constructor(
    private readonly decoder: StepDecoder<S>,
    options: RollingSchedulerOptions = {},
  ) {
    this.maxBatchSize = positive(
      'maxBatchSize',
      options.maxBatchSize ?? DEFAULT_MAX_ROLLING_BATCH_SIZE,
    );
    this.maxPrefillTokens = positive(
      'maxPrefillTokens',
      options.maxPrefillTokens ?? DEFAULT_MAX_ROLLING_BATCH_PREFILL_TOKENS,
    );
    this.maxCacheTokens = positive(
      'maxCacheTokens',
      options.maxCacheTokens ?? this.maxBatchSize * decoder.maxSequenceLength,
    );
    this.maxWaiting = options.maxWaiting ?? 1000;
    this.clock = options.clock ?? systemClock;
  }

  /** Queues a request; resolves when it finishes. Bad requests are refused at once. */
  generate(request: GenerationRequest): Promise<GenerationResult> {
    const problem = this.check(request);
    if (problem) return Promise.reject(problem);
    return new Promise<GenerationResult>((resolve, reject) => {
      this.waiting.push({
        request,
        sampler: new TokenSampler(request.sampling),
        history: [...request.promptTokens],
        generated: [],
        reserved: request.promptTokens.length + request.maxNewTokens,
        submittedAt: this.clock.now(),
        interTokenMs: [],
        resolve,
        reject,
        fed: 0,
      });
      this.kick();
    });
  }

  onStep(listener: StepListener): () => void {
    this.stepListeners.add(listener);
    return () => this.stepListeners.delete(listener);
  }

  stats(): RollingSchedulerStats {
    const used = this.active.reduce((n, s) => n + s.fed + s.generated.length, 0);
    return {
      active: this.active.length,
      waiting: this.waiting.length,
      cacheTokensReserved: this.reserved,
      cacheTokensBudget: this.maxCacheTokens,
      cacheTokensUsed: used,
      cacheBytesUsed: used * this.decoder.cacheBytesPerToken,
      steps: this.steps,
      tokensGenerated: this.tokensGenerated,
    };
  }

  /** Resolves once no request is waiting or running (at once when idle), e.g. to drain. */
  whenIdle(): Promise<void> {
    if (this.active.length === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Refuses new requests and fails the waiting and running ones with CLOSED. */
  close(): void {
    this.closed = true;
    const error = new KilnError(KilnErrorCode.Closed, 'the model is unloading');
    for (const s of this.waiting.splice(0)) s.reject(error);
    for (const s of this.active.splice(0)) this.retire(s, undefined, error);
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private check(request: GenerationRequest): KilnError | undefined {
    const invalid = (message: string) => new KilnError(KilnErrorCode.InvalidInput, message);
    if (this.closed) return new KilnError(KilnErrorCode.Closed, 'the model is unloading');
    const { promptTokens, maxNewTokens } = request;
    if (promptTokens.length === 0) return invalid('the prompt is empty');
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
      return invalid('max_new_tokens must be an integer >= 1');
    const vocab = this.decoder.vocabSize;
    if (promptTokens.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab))
      return invalid(`prompt token ids must be integers in [0, ${vocab})`);
    const total = promptTokens.length + maxNewTokens;
    const limit = Math.min(this.decoder.maxSequenceLength, this.maxCacheTokens);
    if (total > limit)
      return invalid(
        `prompt (${promptTokens.length} tokens) + max_new_tokens (${maxNewTokens}) exceeds the model's limit of ${limit} tokens`,
      );
    if (this.waiting.length >= this.maxWaiting)
      return new KilnError(
        KilnErrorCode.QueueFull,
        `${this.maxWaiting} requests are already waiting`,
      );
    try {
      new TokenSampler(request.sampling);
    } catch (error) {
      return error as KilnError;
    }
    return undefined;
  }

  private kick(): void {
    if (this.running) return;
    this.running = true;
    void this.loop().finally(() => {
      this.running = false;
      // A request may have arrived between the loop's last check and here.
      if (this.waiting.length > 0 && !this.closed) return this.kick();
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    });
  }

  private async loop(): Promise<void> {
    // Let requests submitted in the same tick join the first step.
    await Promise.resolve();
    while (!this.closed) {
      this.dropCancelled();
      this.admit();
      if (this.active.length === 0) return;
      const { entries, prefillTokens } = this.plan();
      const started = this.clock.now();
      let logits: readonly Float32Array[];
      try {
        logits = await this.decoder.step(entries.map((e) => e.entry));
      } catch (error) {
        // A failed step fails the sequences in it; the loop goes on with the others.
        for (const { sequence } of entries) this.retire(sequence, undefined, error);
        continue;
      }
      this.steps++;
      const tokensHandled: Promise<void>[] = [];
      entries.forEach(({ sequence, entry }, i) => {
        if (sequence.state === undefined) return; // retired while the step ran
        if (
          sequence.generated.length === 0 &&
          sequence.fed < sequence.request.promptTokens.length
        ) {
          sequence.fed += entry.tokens.length;
          if (sequence.fed < sequence.request.promptTokens.length) return;
        }
        const handled = this.emit(sequence, logits[i]!);
        if (handled) tokensHandled.push(handled);
      });
      const ms = this.clock.now() - started;
      for (const listener of this.stepListeners)
        listener({ sequences: entries.length, prefillTokens, ms });
      if (tokensHandled.length > 0) await Promise.all(tokensHandled);
    }
  }

  private dropCancelled(): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const s = this.waiting[i]!;
      if (s.request.signal?.aborted) {
        this.waiting.splice(i, 1);
        s.resolve(this.result(s, 'cancelled'));
      }
    }
    for (const s of [...this.active]) if (s.request.signal?.aborted) this.retire(s, 'cancelled');
  }

  /** First come, first served: a request that does not fit holds back those behind it. */
  private admit(): void {
    while (this.waiting.length > 0 && this.active.length < this.maxBatchSize) {
      const next = this.waiting[0]!;
      if (this.reserved + next.reserved > this.maxCacheTokens) break;
      this.waiting.shift();
      this.reserved += next.reserved;
      next.state = this.decoder.open();
      this.active.push(next);
    }
  }

  /** Decoding sequences feed one token each; prefilling ones share the prompt budget. */
  private plan(): {
    entries: { sequence: Sequence<S>; entry: StepEntry<S> }[];
    prefillTokens: number;
  } {
    const entries: { sequence: Sequence<S>; entry: StepEntry<S> }[] = [];
    let budget = this.maxPrefillTokens;
    for (const sequence of this.active) {
      const prompt = sequence.request.promptTokens;
      let tokens: readonly number[];
      if (sequence.generated.length > 0) {
        tokens = [sequence.generated[sequence.generated.length - 1]!];
      } else {
        if (budget === 0) continue;
        tokens = prompt.slice(sequence.fed, sequence.fed + budget);
        budget -= tokens.length;
      }
      entries.push({ sequence, entry: { state: sequence.state!, tokens } });
    }
    return { entries, prefillTokens: this.maxPrefillTokens - budget };
  }

  /** A promise when the token's `onToken` answered one: the sequence may end once it settles. */
  private emit(sequence: Sequence<S>, logits: Float32Array): Promise<void> | undefined {
    const token = sequence.sampler.next(logits, sequence.history);
    const { request } = sequence;
    if (token === request.eosTokenId) {
      this.retire(sequence, 'eos');
      return undefined;
    }
    const now = this.clock.now();
    if (sequence.lastTokenAt === undefined) sequence.firstTokenMs = now - sequence.submittedAt;
    else sequence.interTokenMs.push(now - sequence.lastTokenAt);
    sequence.lastTokenAt = now;
    sequence.generated.push(token);
    sequence.history.push(token);
    this.tokensGenerated++;
    const handling = request.onToken?.(token, sequence.generated.length - 1);
    if (!(handling instanceof Promise)) return this.endIfDone(sequence);
    return handling.then(
      () => this.endIfDone(sequence),
      (error: unknown) => {
        if (sequence.state !== undefined) this.retire(sequence, undefined, error);
      },
    );
  }

  /** Retires a sequence that its last token ended: a stop string, or its length. */
  private endIfDone(sequence: Sequence<S>): undefined {
    if (sequence.state === undefined) return undefined; // closed while its token was handled
    const { request, generated } = sequence;
    if (request.isStop?.(generated)) this.retire(sequence, 'stop');
    else if (generated.length >= request.maxNewTokens) this.retire(sequence, 'length');
    return undefined;
  }

  private retire(sequence: Sequence<S>, reason: FinishReason | undefined, error?: unknown): void {
    const index = this.active.indexOf(sequence);
    if (index >= 0) this.active.splice(index, 1);
    if (sequence.state !== undefined) {
      this.decoder.release(sequence.state);
      sequence.state = undefined;
      this.reserved -= sequence.reserved;
    }
    if (reason) sequence.resolve(this.result(sequence, reason));
    else sequence.reject(error);
  }

  private result(sequence: Sequence<S>, finishReason: FinishReason): GenerationResult {
    return {
      tokens: sequence.generated,
      finishReason,
      promptTokens: sequence.request.promptTokens.length,
      timeToFirstTokenMs: sequence.firstTokenMs,
      interTokenMs: sequence.interTokenMs,
    };
  }
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${name} must be an integer >= 1, got ${value}`,
    );
  return value;
}
