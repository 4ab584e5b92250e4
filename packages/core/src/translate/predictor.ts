import { KilnError, KilnErrorCode } from '../errors.js';
import type { ExecutionContext } from '../engine/execution.js';
import type { ExecutionContextOptions, Model } from '../model/model.js';
import type { NDList } from '../tensor/ndlist.js';
import type { Translator, TranslatorContext } from './translator.js';

export interface PredictOptions {
  signal?: AbortSignal;
}

/** Where the time of one batchPredict went, for metrics. */
export interface PredictTimings {
  /** Inputs in the call. */
  readonly batchSize: number;
  /** Forward calls made (more than one when inputs could not share a batch). */
  readonly forwards: number;
  readonly preprocessMs: number;
  readonly inferenceMs: number;
  readonly postprocessMs: number;
}

export type PredictResult<O> = { ok: true; value: O } | { ok: false; error: KilnError };

export interface PredictorOptions extends ExecutionContextOptions {
  /** Called after every batchPredict with where its time went. */
  onTimings?: (timings: PredictTimings) => void;
}

/**
 * Runs a translator and a model's execution context together (DJL's Predictor). Not
 * re-entrant: one call in flight at a time; concurrency comes from several predictors.
 */
export class Predictor<I, O> {
  private busy = false;
  private closed = false;

  private constructor(
    readonly model: Model,
    private readonly translator: Translator<I, O>,
    private readonly context: ExecutionContext,
    private readonly translatorContext: TranslatorContext,
    private readonly onTimings: ((timings: PredictTimings) => void) | undefined,
  ) {}

  static async create<I, O>(
    model: Model,
    translator: Translator<I, O>,
    options: PredictorOptions = {},
  ): Promise<Predictor<I, O>> {
    const translatorContext: TranslatorContext = { model, arguments: model.properties.raw };
    await translator.prepare?.(translatorContext);
    const context = await model.newExecutionContext(options);
    return new Predictor(model, translator, context, translatorContext, options.onTimings);
  }

  /** The cores its execution context pinned its compute threads to, if it did. */
  get pinnedCores(): readonly number[] | undefined {
    return this.context.pinnedCores;
  }

  /** `batchPredict([input])[0]`: one code path for one input and many. */
  async predict(input: I, options?: PredictOptions): Promise<O> {
    const [output] = await this.batchPredict([input], options);
    return output!;
  }

  /** Predicts a batch; rejects with the first input's error if any input fails. */
  async batchPredict(inputs: readonly I[], options?: PredictOptions): Promise<O[]> {
    const results = await this.batchPredictSettled(inputs, options);
    return results.map((r) => {
      if (!r.ok) throw r.error;
      return r.value;
    });
  }

  /**
   * Predicts a batch where each input succeeds or fails on its own: a bad input fails only
   * itself, and inputs that cannot share one batch run in as many batches as they need.
   */
  async batchPredictSettled(
    inputs: readonly I[],
    options: PredictOptions = {},
  ): Promise<PredictResult<O>[]> {
    if (this.closed) throw new KilnError(KilnErrorCode.Closed, 'predictor is closed');
    if (this.busy) {
      throw new KilnError(
        KilnErrorCode.PredictorBusy,
        'predictor already has a call in flight; use one predictor per concurrent caller',
      );
    }
    this.busy = true;
    try {
      return await this.run(inputs, options);
    } finally {
      this.busy = false;
    }
  }

  /** Ends its context's per-operator profile (see ExecutionContext.endProfiling). */
  endProfiling(options: { skipRuns?: number } = {}): Promise<unknown> {
    if (!this.context.endProfiling)
      return Promise.reject(
        new KilnError(
          KilnErrorCode.InvalidConfig,
          `engine ${this.model.engine} does not profile its operators`,
        ),
      );
    return this.context.endProfiling(options);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.context.close();
  }

  private async run(inputs: readonly I[], options: PredictOptions): Promise<PredictResult<O>[]> {
    const results: (PredictResult<O> | undefined)[] = new Array(inputs.length);
    const ctx = this.translatorContext;

    const t0 = performance.now();
    const prepared: { index: number; list: NDList }[] = [];
    await eachSettled(
      inputs,
      (input) => this.translator.processInput(ctx, input),
      (list, index) => prepared.push({ index, list }),
      (error, index) => (results[index] = translatorFailure(error, 'process the input')),
    );
    // Asynchronous translators finish in any order.
    prepared.sort((a, b) => a.index - b.index);

    const t1 = performance.now();
    const outputs = new Map<number, NDList>();
    let forwards = 0;
    for (const group of this.groups(prepared)) {
      forwards += await this.forwardGroup(group, outputs, results, options);
    }

    const t2 = performance.now();
    const answered = [...outputs];
    await eachSettled(
      answered,
      ([index, output]) => this.translator.processOutput(ctx, output, inputs[index]!),
      (value, i) => (results[answered[i]![0]] = { ok: true, value }),
      (error, i) => (results[answered[i]![0]] = translatorFailure(error, 'process the output')),
    );
    const t3 = performance.now();

    this.onTimings?.({
      batchSize: inputs.length,
      forwards,
      preprocessMs: t1 - t0,
      inferenceMs: t2 - t1,
      postprocessMs: t3 - t2,
    });
    return results.map(
      (r) => r ?? failure(new Error('input produced no result'), KilnErrorCode.Internal),
    );
  }

  /**
   * Splits prepared inputs into runs that the batchifier accepts together, in order. A
   * server's queue already makes each batch of one declared layout (servingBatchKeyOf in
   * `@kiln/batching`), so this parts only inputs whose layout their translator first made
   * (images, JSON), or callers that batch by hand.
   */
  private groups(prepared: { index: number; list: NDList }[]): { index: number; list: NDList }[][] {
    const batchifier = this.translator.batchifier;
    if (!batchifier) return prepared.map((p) => [p]);
    // Most batches share one shape: one check of the whole set instead of one per input.
    if (prepared.length > 1 && batchifier.canBatch(prepared.map((p) => p.list))) return [prepared];
    const groups: { index: number; list: NDList }[][] = [];
    for (const item of prepared) {
      const target = groups.find((g) => batchifier.canBatch([...g.map((x) => x.list), item.list]));
      if (target) target.push(item);
      else groups.push([item]);
    }
    return groups;
  }

  /**
   * Runs one group. When a batched forward fails, its inputs are retried one by one so that
   * a single bad input fails only itself. Returns the number of forward calls made.
   */
  private async forwardGroup(
    group: { index: number; list: NDList }[],
    outputs: Map<number, NDList>,
    results: (PredictResult<O> | undefined)[],
    options: PredictOptions,
  ): Promise<number> {
    const batchifier = this.translator.batchifier;
    if (options.signal?.aborted) {
      for (const item of group)
        results[item.index] = failure(abortReason(options.signal), KilnErrorCode.Cancelled);
      return 0;
    }
    if (batchifier && group.length > 1) {
      try {
        const batch = batchifier.batchify(group.map((g) => g.list));
        const split = batch.unbatchify(await this.context.forward(batch.input, options));
        group.forEach((item, i) => outputs.set(item.index, split[i]!));
        return 1;
      } catch {
        let calls = 1;
        for (const item of group)
          calls += await this.forwardGroup([item], outputs, results, options);
        return calls;
      }
    }
    const [item] = group;
    try {
      outputs.set(item!.index, await this.context.forward(item!.list, options));
    } catch (error) {
      results[item!.index] = failure(error, KilnErrorCode.EngineError);
    }
    return 1;
  }
}

/**
 * Calls `step` on each item, in order, and reports each outcome; waits only for the steps that
 * answered with a promise. A translator that answers at once (most do) costs no promise and
 * no turn of the microtask queue per input.
 */
async function eachSettled<T, R>(
  items: readonly T[],
  step: (item: T) => Promise<R> | R,
  onValue: (value: R, index: number) => void,
  onError: (error: unknown, index: number) => void,
): Promise<void> {
  let pending: Promise<void>[] | undefined;
  items.forEach((item, index) => {
    let answer: Promise<R> | R;
    try {
      answer = step(item);
    } catch (error) {
      onError(error, index);
      return;
    }
    if (isThenable(answer)) {
      (pending ??= []).push(
        Promise.resolve(answer).then(
          (value) => onValue(value, index),
          (error: unknown) => onError(error, index),
        ),
      );
    } else onValue(answer, index);
  });
  if (pending) await Promise.all(pending);
}

function isThenable<R>(value: Promise<R> | R): value is Promise<R> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

function failure(error: unknown, code: KilnErrorCode): { ok: false; error: KilnError } {
  return { ok: false, error: KilnError.wrap(error, code) };
}

/**
 * Only the KilnErrors a translator raises on purpose reach the client as they are (a bad
 * input is its to judge); anything else is a bug of the translator: a 500 whose message says
 * nothing of its internals, with the original message kept in `details` for the log.
 */
function translatorFailure(error: unknown, stage: string): { ok: false; error: KilnError } {
  if (error instanceof KilnError) return { ok: false, error };
  return {
    ok: false,
    error: new KilnError(KilnErrorCode.Internal, `the model's translator failed to ${stage}`, {
      cause: error,
      details: { reason: error instanceof Error ? error.message : String(error) },
    }),
  };
}

function abortReason(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  return reason instanceof KilnError
    ? reason
    : new KilnError(KilnErrorCode.Cancelled, 'request was cancelled');
}
