import os from 'node:os';
import { type InputFile, benchInput } from '../inputs/bench-input.js';
import { openModelPool } from '../inprocess/model-pool.js';
import { levelResult } from '../load/level-result.js';
import { type MeasureOptions, measureConcurrency, measureRate } from '../load/measure-level.js';
import type { InputSpec } from '../options/shapes.js';
import { NO_PROGRESS, type ProgressReporter } from '../progress.js';
import type { LevelResult, TuneCandidate, TuneResult } from '../results.js';
import type { StabilityRule } from '../stats/stability.js';
import { recommendedProperties } from './recommendation.js';

export interface TuneOptions {
  readonly url: string;
  readonly engine?: string | undefined;
  readonly overrides?: Readonly<Record<string, string>> | undefined;
  readonly inputs?: readonly InputSpec[] | undefined;
  readonly inputFile?: InputFile | undefined;
  /** P99 latency the recommendation must stay within, ms. */
  readonly latencyBudgetMs?: number | undefined;
  /** `batch_size` values to try (default 1, 2, 4, 8). */
  readonly batchSizes?: readonly number[] | undefined;
  /** `max_batch_delay` values (ms) to try with batches above 1 (default 2, 10, 50). */
  readonly delaysMs?: readonly number[] | undefined;
  /** Worker counts to try; each gets cores ÷ workers intra-op threads (default 1, 2, 4… up to the cores). */
  readonly workers?: readonly number[] | undefined;
  /** Most clients used to load a configuration. */
  readonly maxConcurrency?: number | undefined;
  readonly windowMs: number;
  readonly maxWindows: number;
  readonly stability?: StabilityRule | undefined;
  readonly progress?: ProgressReporter | undefined;
}

interface Config {
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
  readonly workers: number;
  readonly threads: number;
}

/** How a configuration is loaded: closed-loop clients, or requests arriving at a fixed rate. */
type Load = { readonly mode: 'concurrency' } | { readonly mode: 'rate'; readonly rate: number };

/** A later (more complex) configuration must beat the current one by this much to win. */
const MIN_GAIN = 1.05;
/** Share of the best throughput offered when comparing batch delays. */
const DELAY_LOAD = 0.5;

/**
 * Finds a serving configuration for a model and a latency budget in three steps, as a person
 * would (and as Model Analyzer's quick search does):
 * 1. the worker/thread split without batching, then 2. `batch_size` on the best split, each
 * loaded by closed-loop clients at workers × batch and twice that, scored by the highest
 * throughput whose P99 fits the budget;
 * 3. `max_batch_delay` for the best batch. Closed-loop clients fill batches at once, so a
 * delay only shows its worth when requests arrive on their own: each delay is offered half of
 * the best throughput at a fixed rate, and the lowest P99 wins.
 * A more complex choice must beat a simpler one by 5%, more than run-to-run noise.
 */
export async function runTune(options: TuneOptions): Promise<TuneResult> {
  const progress = options.progress ?? NO_PROGRESS;
  const cores = os.availableParallelism();
  const input = await benchInput(options);
  const splits = (options.workers ?? powersOfTwoUpTo(cores)).map((workers) => ({
    workers,
    threads: Math.max(1, Math.floor(cores / workers)),
  }));
  const batchSizes = options.batchSizes ?? [1, 2, 4, 8];
  const delays = options.delaysMs ?? [2, 10, 50];
  const maxConcurrency = options.maxConcurrency ?? 64;
  const measure: MeasureOptions = {
    windowMs: options.windowMs,
    maxWindows: options.maxWindows,
    ...(options.stability ? { stability: options.stability } : {}),
  };
  progress.start(splits.length + batchSizes.filter((b) => b > 1).length + delays.length, 'tuning');

  const candidates: TuneCandidate[] = [];
  let engine = options.engine ?? '';
  let model = '';
  const tryConfig = async (config: Config, load: Load): Promise<TuneCandidate> => {
    progress.update(
      candidates.length,
      `batch ${config.batchSize}, delay ${config.maxBatchDelayMs} ms, ${config.workers}×${config.threads}`,
    );
    const opened = await openModelPool({
      url: options.url,
      engine: options.engine,
      overrides: options.overrides ?? {},
      workers: config.workers,
      threads: config.threads,
      batchSize: config.batchSize,
      maxBatchDelayMs: config.maxBatchDelayMs,
      queueSize: Math.max(maxConcurrency * 2, 1000),
    });
    engine = opened.engine;
    model = opened.model;
    try {
      // The first runs allocate; they are not part of any level.
      for (let i = 0; i < config.workers * 2; i++) await opened.pool.predict(input.value);
      const send = async () => void (await opened.pool.predict(input.value));
      const levels: LevelResult[] = [];
      if (load.mode === 'rate') {
        const measured = await measureRate(send, load.rate, {
          ...measure,
          maxOutstanding: maxConcurrency * 16,
        });
        levels.push(levelResult(measured, undefined));
      } else {
        const base = config.workers * config.batchSize;
        for (const concurrency of new Set(
          [base, base * 2].map((c) => Math.min(c, maxConcurrency)),
        )) {
          levels.push(levelResult(await measureConcurrency(send, concurrency, measure), undefined));
        }
      }
      const candidate: TuneCandidate = {
        ...config,
        load: load.mode,
        levels,
        best: bestLevel(levels, options.latencyBudgetMs),
      };
      candidates.push(candidate);
      return candidate;
    } finally {
      await opened.close();
    }
  };

  let best: TuneCandidate | undefined;
  for (const split of splits) {
    best = higherThroughput(
      best,
      await tryConfig({ ...split, batchSize: 1, maxBatchDelayMs: 0 }, { mode: 'concurrency' }),
    );
  }
  const split = best ?? candidates[0]!;
  for (const batchSize of batchSizes.filter((b) => b > 1)) {
    const config = {
      workers: split.workers,
      threads: split.threads,
      batchSize,
      maxBatchDelayMs: delays[0] ?? 0,
    };
    best = higherThroughput(best, await tryConfig(config, { mode: 'concurrency' }));
  }
  let recommended = best?.best ? best : undefined;
  if (recommended && recommended.batchSize > 1 && delays.length > 1) {
    const rate = Number((recommended.best!.throughput * DELAY_LOAD).toFixed(1));
    let chosen: TuneCandidate | undefined;
    for (const maxBatchDelayMs of delays) {
      const config = {
        workers: recommended.workers,
        threads: recommended.threads,
        batchSize: recommended.batchSize,
        maxBatchDelayMs,
      };
      chosen = lowerLatency(chosen, await tryConfig(config, { mode: 'rate', rate }));
    }
    if (chosen?.best) recommended = chosen;
  }
  progress.stop();
  return {
    kind: 'tune',
    model,
    url: options.url,
    engine,
    inputs: input.label,
    latencyBudgetMs: options.latencyBudgetMs,
    candidates,
    recommended,
    properties: recommended ? recommendedProperties(recommended, engine) : {},
  };
}

/**
 * The highest-throughput level whose P99 fits the budget (every level fits without one). A
 * level with failures (requests beyond what the pool can hold) does not count.
 */
export function bestLevel(
  levels: readonly LevelResult[],
  budgetMs: number | undefined,
): LevelResult | undefined {
  return levels
    .filter(
      (l) =>
        l.requests > 0 && l.errors === 0 && (budgetMs === undefined || l.latency.p99Ms <= budgetMs),
    )
    .reduce<LevelResult | undefined>(
      (top, l) => (!top || l.throughput > top.throughput ? l : top),
      undefined,
    );
}

/** The candidate with the higher in-budget throughput; the simpler, earlier one unless the gain is clear. */
function higherThroughput(current: TuneCandidate | undefined, next: TuneCandidate): TuneCandidate {
  if (!current?.best) return next.best || !current ? next : current;
  if (!next.best) return current;
  return next.best.throughput > current.best.throughput * MIN_GAIN ? next : current;
}

/** The candidate with the lower in-budget P99 at the same offered rate; the shorter delay unless clearly worse. */
function lowerLatency(current: TuneCandidate | undefined, next: TuneCandidate): TuneCandidate {
  if (!current?.best) return next.best || !current ? next : current;
  if (!next.best) return current;
  return next.best.latency.p99Ms * MIN_GAIN < current.best.latency.p99Ms ? next : current;
}

function powersOfTwoUpTo(cores: number): number[] {
  const out: number[] = [];
  for (let w = 1; w <= cores; w *= 2) out.push(w);
  return out;
}
