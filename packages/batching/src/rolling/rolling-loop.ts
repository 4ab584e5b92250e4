import {
  KilnError,
  KilnErrorCode,
  MAX_TOP_LOGPROBS,
  StopText,
  checkSamplingParams,
} from '@kiln/core';
import { type Clock, systemClock } from '../clock.js';
import type { Job } from '../job.js';
import type { JobQueue } from '../job-queue.js';
import { type AdmissionPolicy, RecentStepTime, admissionRank } from './admission.js';
import { groupByPast } from './past-groups.js';
import type {
  FinishReason,
  GenerationChunk,
  GenerationJob,
  GenerationOutput,
} from './generation-job.js';
import type {
  SequenceEntry,
  SequenceOpen,
  StepModelInfo,
  StepRequest,
  StepRunner,
  TokenAlternatives,
} from './step-protocol.js';

/** DJL LMI's defaults: `max_rolling_batch_size` 32, `max_rolling_batch_prefill_tokens` 4096. */
export const DEFAULT_MAX_ROLLING_BATCH_SIZE = 32;
export const DEFAULT_MAX_ROLLING_BATCH_PREFILL_TOKENS = 4096;

export type GenerationJobOf = Job<GenerationJob, GenerationOutput>;

export interface RollingLoopOptions {
  /** Most sequences decoding at once (`option.max_rolling_batch_size`). */
  readonly maxBatchSize?: number | undefined;
  /** Most prompt tokens fed in one step (`option.max_rolling_batch_prefill_tokens`). */
  readonly maxPrefillTokens?: number | undefined;
  /**
   * Cache budget in tokens over all active sequences. A sequence reserves prompt + max new
   * tokens when admitted, so a running one never runs out; others wait in the queue. Default:
   * the batch size times the model's longest sequence.
   */
  readonly maxCacheTokens?: number | undefined;
  /** The queue's clock: a job's times count from its submission. */
  readonly clock?: Clock | undefined;
  /** Called once per job the loop took, as it leaves: answered, or settled elsewhere. */
  readonly onDone?: ((job: GenerationJobOf, outcome: JobOutcome) => void) | undefined;
}

export type JobOutcome =
  | { readonly answered: true; readonly output: GenerationOutput; readonly admittedAt: number }
  | { readonly answered: true; readonly error: KilnError; readonly admittedAt: number }
  /** Cancelled, timed out or closed meanwhile: someone else answered it. */
  | { readonly answered: false; readonly admittedAt: number };

export interface RollingLoopStats {
  readonly active: number;
  readonly cacheTokensReserved: number;
  readonly cacheTokensBudget: number;
  readonly cacheTokensUsed: number;
  readonly cacheBytesUsed: number;
  readonly steps: number;
  readonly tokensGenerated: number;
}

/** One step, for metrics: `ms` is its round trip seen here, `hostMs` its time with the model. */
export interface StepReport {
  readonly sequences: number;
  readonly prefillTokens: number;
  readonly ms: number;
  readonly hostMs: number;
}

/** Hands the loop queued jobs between steps: up to `max`, while `fits` accepts them. */
export type TakeJobs = (max: number, fits: (job: GenerationJob) => boolean) => GenerationJobOf[];

interface Sequence {
  readonly seq: number;
  readonly job: GenerationJobOf;
  readonly stopText: StopText;
  readonly generated: number[];
  readonly interTokenMs: number[];
  readonly reserved: number;
  readonly admittedAt: number;
  /** Prompt tokens already fed. */
  fed: number;
  done: boolean;
  /** The job's onChunk promise: the sequence sits out steps until it settles. */
  held: Promise<void> | undefined;
  lastTokenAt?: number;
  firstTokenMs?: number;
}

/**
 * Iteration-level ("rolling", "continuous") batching, as in Orca, vLLM and DJL's LMI, for one
 * step worker: every step it admits queued jobs while slots and cache budget allow, feeds each
 * decoding sequence its last token and prefilling sequences a chunk of their prompt (at most
 * `maxPrefillTokens` per step, so a long prompt cannot stall running decodes), streams each
 * new token, and retires finished sequences at once. The model, the sampling and the
 * detokenizing are the StepRunner's: only token ids and text pieces come back.
 */
export class RollingLoop {
  readonly maxBatchSize: number;
  readonly maxPrefillTokens: number;
  readonly maxCacheTokens: number;
  private readonly clock: Clock;
  private readonly active: Sequence[] = [];
  /** Admitted sequences the runner has not been told of yet. */
  private readonly unopened: Sequence[] = [];
  private releases: number[] = [];
  private readonly stepListeners = new Set<(step: StepReport) => void>();
  private readonly onDone: RollingLoopOptions['onDone'];
  private reserved = 0;
  private nextSeq = 1;
  /** The decoding rows' runs at the last step, kept while the same sequences decode. */
  private decodeRuns = new Map<number, number>();
  /** What one more decode run costs (the model's figure, updated by each step's reply). */
  private decodeRunCost: number;
  private steps = 0;
  private tokensGenerated = 0;

  constructor(
    private readonly runner: StepRunner,
    readonly model: StepModelInfo,
    options: RollingLoopOptions = {},
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
      options.maxCacheTokens ?? this.maxBatchSize * model.maxSequenceLength,
    );
    this.clock = options.clock ?? systemClock;
    this.onDone = options.onDone;
    this.decodeRunCost = model.decodeRunCost ?? Infinity;
  }

  /** Why a job can never run on this model (INVALID_INPUT), if it cannot. */
  check(job: GenerationJob): KilnError | undefined {
    return checkGenerationJob(job, {
      vocabSize: this.model.vocabSize,
      maxTokens: Math.min(this.model.maxSequenceLength, this.maxCacheTokens),
    });
  }

  /** Jobs being decoded. */
  jobs(): GenerationJobOf[] {
    return this.active.map((s) => s.job);
  }

  onStep(listener: (step: StepReport) => void): () => void {
    this.stepListeners.add(listener);
    return () => this.stepListeners.delete(listener);
  }

  stats(): RollingLoopStats {
    const used = this.active.reduce((n, s) => n + s.fed + s.generated.length, 0);
    return {
      active: this.active.length,
      cacheTokensReserved: this.reserved,
      cacheTokensBudget: this.maxCacheTokens,
      cacheTokensUsed: used,
      cacheBytesUsed: used * this.model.cacheBytesPerToken,
      steps: this.steps,
      tokensGenerated: this.tokensGenerated,
    };
  }

  /**
   * Serves `first` and whatever `take` hands over before each step, until no sequence is
   * left. Every job it took is settled (or was settled elsewhere) when it returns; it never
   * rejects.
   */
  async run(first: readonly GenerationJobOf[], take: TakeJobs): Promise<void> {
    this.admit(first);
    for (;;) {
      this.dropSettled();
      const free = this.maxBatchSize - this.active.length;
      if (free > 0) this.admit(take(free, this.fitter()));
      if (this.active.length === 0) break;
      const { entries, sequences, prefillTokens } = this.plan();
      if (entries.length === 0) {
        // Every sequence waits for its reader.
        await Promise.race(this.active.map((s) => s.held));
        continue;
      }
      const request: StepRequest = {
        opens: this.unopened.splice(0).map((sequence) => openOf(sequence)),
        entries,
        releases: this.releases.splice(0),
      };
      const started = this.clock.now();
      let reply;
      try {
        reply = await this.runner.step(request);
      } catch (cause) {
        // A failed step fails the sequences in it; the loop goes on with the others.
        const error = KilnError.wrap(cause, KilnErrorCode.EngineError, 'the step failed');
        for (const sequence of sequences) this.retire(sequence, undefined, error);
        continue;
      }
      const ms = this.clock.now() - started;
      this.steps++;
      if (reply.decodeRunCost !== undefined) this.decodeRunCost = reply.decodeRunCost;
      // Sequences that failed on their own (a response format): the others go on.
      for (const { seq, error } of reply.failures ?? []) {
        const sequence = sequences.find((s) => s.seq === seq);
        if (sequence) this.retire(sequence, undefined, KilnError.fromJSON(error), true);
      }
      let k = 0;
      entries.forEach((entry, i) => {
        const sequence = sequences[i]!;
        if (sequence.generated.length === 0) sequence.fed += entry.tokens.length;
        if (!entry.sample) return;
        const at = k++;
        if (sequence.done) return; // cancelled while the step ran
        this.emit(sequence, reply.tokens[at]!, reply.texts[at] ?? '', {
          logprob: reply.logprobs?.[at],
          alternatives: reply.alternatives?.[at],
        });
      });
      for (const listener of this.stepListeners)
        listener({ sequences: entries.length, prefillTokens, ms, hostMs: reply.hostMs });
    }
    // Free the caches of the sequences that ended last, before the loop waits for more work.
    if (this.releases.length > 0) {
      const releases = this.releases.splice(0);
      await this.runner.step({ opens: [], entries: [], releases }).catch(() => undefined);
    }
  }

  /** Accepts jobs, oldest first, while their reservations fit in what the cache has left. */
  private fitter(): (job: GenerationJob) => boolean {
    let left = this.maxCacheTokens - this.reserved;
    return (job) => {
      // A job that can never run is taken to be refused, not left blocking the queue.
      if (this.check(job)) return true;
      if (reserve(job) > left) return false;
      left -= reserve(job);
      return true;
    };
  }

  private admit(jobs: readonly GenerationJobOf[]): void {
    const now = this.clock.now();
    for (const job of jobs) {
      if (job.settled) continue;
      const problem = this.check(job.input);
      if (problem) {
        job.reject(problem);
        this.onDone?.(job, { answered: true, error: problem, admittedAt: now });
        continue;
      }
      const sequence: Sequence = {
        seq: this.nextSeq++,
        job,
        stopText: new StopText(job.input.stop ?? []),
        generated: [],
        interTokenMs: [],
        reserved: reserve(job.input),
        admittedAt: now,
        fed: 0,
        done: false,
        held: undefined,
      };
      this.reserved += sequence.reserved;
      this.active.push(sequence);
      this.unopened.push(sequence);
    }
  }

  /** Jobs cancelled, timed out or closed since the last step leave and free their slots. */
  private dropSettled(): void {
    for (const sequence of [...this.active]) if (sequence.job.settled) this.retire(sequence);
  }

  /**
   * Decoding sequences feed one token each; prefilling ones share the prompt budget. The
   * step's makeup is decided here: decoding rows run in groups of similar past where padding
   * them together costs more than another run (groupByPast), prompt chunks in one run of
   * their own, so a one-token decode is never padded to a chunk's length.
   */
  private plan(): { entries: SequenceEntry[]; sequences: Sequence[]; prefillTokens: number } {
    const decoding: Sequence[] = [];
    const prefilling: { sequence: Sequence; tokens: readonly number[]; sample: boolean }[] = [];
    let budget = this.maxPrefillTokens;
    for (const sequence of this.active) {
      if (sequence.held) continue;
      if (sequence.generated.length > 0) {
        decoding.push(sequence);
        continue;
      }
      if (budget === 0) continue;
      const prompt = sequence.job.input.promptTokens;
      const tokens = prompt.slice(sequence.fed, sequence.fed + budget);
      budget -= tokens.length;
      prefilling.push({ sequence, tokens, sample: sequence.fed + tokens.length === prompt.length });
    }
    const runs = this.runsOf(decoding);
    const entries: SequenceEntry[] = decoding.map((sequence) => ({
      seq: sequence.seq,
      tokens: [sequence.generated[sequence.generated.length - 1]!],
      sample: true,
      run: runs.get(sequence.seq)!,
    }));
    const sequences = [...decoding];
    const prefillRun = runs.size === 0 ? 0 : Math.max(...runs.values()) + 1;
    for (const { sequence, tokens, sample } of prefilling) {
      entries.push({ seq: sequence.seq, tokens, sample, run: prefillRun });
      sequences.push(sequence);
    }
    return { entries, sequences, prefillTokens: this.maxPrefillTokens - budget };
  }

  /**
   * Each decoding sequence's run. The same company keeps its runs (the decoder keeps a run's
   * caches together between steps); a change of company regroups by past length.
   */
  private runsOf(decoding: readonly Sequence[]): Map<number, number> {
    const same =
      decoding.length === this.decodeRuns.size && decoding.every((s) => this.decodeRuns.has(s.seq));
    if (same) return this.decodeRuns;
    const runs = new Map<number, number>();
    if (decoding.length > 0) {
      // Positions cached: the prompt and every token but the last, which this step feeds.
      const pasts = decoding.map((s) => s.fed + s.generated.length - 1);
      groupByPast(pasts, this.decodeRunCost).forEach((rows, run) => {
        for (const row of rows) runs.set(decoding[row]!.seq, run);
      });
    }
    return (this.decodeRuns = runs);
  }

  private emit(
    sequence: Sequence,
    token: number,
    text: string,
    { logprob, alternatives }: { logprob?: number; alternatives?: TokenAlternatives | undefined },
  ): void {
    const { job, generated, stopText } = sequence;
    const ends = token === this.model.eosTokenId || job.input.eosTokenIds?.includes(token);
    if (ends && !job.input.ignoreEos) {
      const rest = stopText.flush();
      // Text held back for a stop string that never came: it goes with the last token.
      if (rest && generated.length > 0)
        this.deliver(sequence, {
          token: generated.at(-1)!,
          text: rest,
          index: generated.length - 1,
        });
      this.retire(sequence, 'eos');
      return;
    }
    const now = this.clock.now();
    if (sequence.lastTokenAt === undefined) sequence.firstTokenMs = now - job.enqueuedAt;
    else sequence.interTokenMs.push(now - sequence.lastTokenAt);
    sequence.lastTokenAt = now;
    generated.push(token);
    this.tokensGenerated++;
    let shown = stopText.push(text);
    const ending = stopText.stopped || generated.length >= job.input.maxNewTokens;
    if (ending && !stopText.stopped) shown += stopText.flush();
    const chunk: GenerationChunk = {
      token,
      text: shown,
      index: generated.length - 1,
      ...(job.input.logprobs && logprob !== undefined ? { logprob } : {}),
      ...(job.input.logprobs && alternatives
        ? {
            tokenText: alternatives.text,
            ...(job.input.topLogprobs ? { topLogprobs: alternatives.top } : {}),
          }
        : {}),
    };
    const handled = this.deliver(sequence, chunk);
    const end = () => {
      if (sequence.done) return;
      if (stopText.stopped) this.retire(sequence, 'stop');
      else if (generated.length >= job.input.maxNewTokens) this.retire(sequence, 'length');
    };
    if (!handled) return end();
    sequence.held = handled.then(
      () => {
        sequence.held = undefined;
        end();
      },
      (error: unknown) => {
        sequence.held = undefined;
        if (!sequence.done)
          this.retire(sequence, undefined, KilnError.wrap(error, KilnErrorCode.Internal));
      },
    );
  }

  /** Hands a chunk to the job's reader; a promise when the reader asks the job to wait. */
  private deliver(sequence: Sequence, chunk: GenerationChunk): Promise<void> | undefined {
    try {
      const handled = sequence.job.onChunk?.(chunk);
      return handled instanceof Promise ? handled : undefined;
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /** Ends a sequence; `closed` when the runner closed it already (no release to send). */
  private retire(
    sequence: Sequence,
    reason?: FinishReason,
    error?: KilnError,
    closed = false,
  ): void {
    if (sequence.done) return;
    sequence.done = true;
    this.active.splice(this.active.indexOf(sequence), 1);
    this.reserved -= sequence.reserved;
    const unopened = this.unopened.indexOf(sequence);
    if (unopened >= 0) this.unopened.splice(unopened, 1);
    else if (!closed) this.releases.push(sequence.seq);
    const { job, admittedAt } = sequence;
    if (job.settled) {
      this.onDone?.(job, { answered: false, admittedAt });
    } else if (reason) {
      const output = this.output(sequence, reason);
      job.resolve(output);
      this.onDone?.(job, { answered: true, output, admittedAt });
    } else {
      const failure = error ?? new KilnError(KilnErrorCode.Internal, 'the sequence failed');
      job.reject(failure);
      this.onDone?.(job, { answered: true, error: failure, admittedAt });
    }
  }

  private output(sequence: Sequence, finishReason: FinishReason): GenerationOutput {
    return {
      text: sequence.stopText.all,
      tokens: sequence.generated,
      finishReason,
      promptTokens: sequence.job.input.promptTokens.length,
      timeToFirstTokenMs: sequence.firstTokenMs,
      interTokenMs: sequence.interTokenMs,
    };
  }
}

/**
 * Serves a queue with one loop on this thread, as a step worker serves the pool's, until the
 * queue is closed and empty: in-process generation (tests, benches) with no threads between.
 * `admission` orders the waiting jobs it takes (default first come, first served).
 */
export async function serveQueue(
  loop: RollingLoop,
  queue: JobQueue<GenerationJob, GenerationOutput>,
  options: { readonly admission?: AdmissionPolicy } = {},
): Promise<void> {
  const steps = new RecentStepTime();
  const stopWatching = loop.onStep((step) => steps.observe(step.ms));
  const rank = admissionRank(options.admission ?? 'first_come', () => steps.ms);
  try {
    for (;;) {
      const first = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0, rank });
      if (first.length === 0) return;
      await loop.run(first, (max, fits) => queue.takeNow(max, fits, rank));
    }
  } finally {
    stopWatching();
  }
}

/** How the runner starts a sequence: its sampling, and whether it reports log-probabilities. */
function openOf({ seq, job }: Sequence): SequenceOpen {
  const { input } = job;
  return {
    seq,
    sampling: input.sampling,
    logprobs: input.logprobs,
    topLogprobs: input.topLogprobs,
    ...(input.responseFormat ? { responseFormat: input.responseFormat } : {}),
  };
}

/** Cache tokens a job holds while it runs: its prompt and every token it may add. */
function reserve(job: GenerationJob): number {
  return job.promptTokens.length + job.maxNewTokens;
}

/**
 * Why a generation job can never run (INVALID_INPUT), if it cannot: an empty prompt, a bad
 * max_new_tokens or sampling parameter, token ids outside the vocabulary, or more tokens than
 * `maxTokens` (the model's longest sequence, or the cache budget). Limits not known yet are
 * left out.
 */
export function checkGenerationJob(
  job: GenerationJob,
  limits: { vocabSize?: number | undefined; maxTokens?: number | undefined },
): KilnError | undefined {
  const invalid = (message: string) => new KilnError(KilnErrorCode.InvalidInput, message);
  const { promptTokens, maxNewTokens } = job;
  if (promptTokens.length === 0) return invalid('the prompt is empty');
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
    return invalid('max_new_tokens must be an integer >= 1');
  const vocab = limits.vocabSize;
  if (vocab !== undefined && promptTokens.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab))
    return invalid(`prompt token ids must be integers in [0, ${vocab})`);
  const limit = limits.maxTokens;
  if (limit !== undefined && promptTokens.length + maxNewTokens > limit)
    return invalid(
      `prompt (${promptTokens.length} tokens) + max_new_tokens (${maxNewTokens}) exceeds the model's limit of ${limit} tokens`,
    );
  const top = job.topLogprobs;
  if (top !== undefined && !(Number.isInteger(top) && top >= 0 && top <= MAX_TOP_LOGPROBS))
    return invalid(`top_logprobs must be an integer in [0, ${MAX_TOP_LOGPROBS}]`);
  try {
    checkSamplingParams(job.sampling ?? {});
  } catch (error) {
    return error as KilnError;
  }
  return undefined;
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${name} must be an integer >= 1, got ${value}`,
    );
  return value;
}
