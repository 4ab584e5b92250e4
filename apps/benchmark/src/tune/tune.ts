import os from 'node:os';
import { type ServingInput, type TensorDescriptor, findAllocatorLibrary } from '@kiln/core';
import { type InputFile, benchInput } from '../inputs/bench-input.js';
import { specsFromSignature } from '../inputs/synthetic-tensors.js';
import { openModelPool } from '../inprocess/model-pool.js';
import { levelResult } from '../load/level-result.js';
import { type MeasureOptions, measureConcurrency, measureRate } from '../load/measure-level.js';
import type { InputSpec } from '../options/shapes.js';
import { NO_PROGRESS, type ProgressReporter } from '../progress.js';
import type { LevelResult, TuneCandidate, TuneResult } from '../results.js';
import type { StabilityRule } from '../stats/stability.js';
import {
  type TunedExtras,
  declaredKey,
  recommendedConfigProperties,
  recommendedProperties,
} from './recommendation.js';
import {
  bucketBoundaries,
  dynamicAxes,
  maxLengthOf,
  variableLengthInputs,
} from './sequence-inputs.js';

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

/** What one of the last steps changes from the recommended configuration. */
interface Variant {
  /** Shown in reports (`batchifier=bucket, variable lengths`). */
  readonly setting: string;
  /** serving.properties keys added to the model's. */
  readonly overrides?: Readonly<Record<string, string>>;
  /** Requests sent in turn instead of the one input. */
  readonly inputs?: readonly ServingInput[];
  readonly pinCores?: boolean;
}

/** Requests of the variable-length step: enough to cycle through every length a few times. */
const VARIABLE_REQUESTS = 256;

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
 * Then, on the recommended configuration: 4. for a model with a dynamic non-batch axis
 * (sequence length), requests of varying lengths with `batchifier=stack` against `bucket`;
 * 5. where Kiln declares `cpu_pinning`, pinned workers against unpinned (Linux);
 * 6. for a Python-mode model, its worker processes with jemalloc against glibc's malloc
 * (`option.allocator`), where Debian's libjemalloc2 is installed. The server process's own
 * allocator (`cpu_launcher_args --enable_jemalloc`) is chosen when it starts, so an engine
 * that runs inside it cannot be compared from this process: the tune leaves that key out.
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
  // At most six more: two batchifiers under variable lengths, pinned and not, two allocators.
  progress.start(
    splits.length + batchSizes.filter((b) => b > 1).length + delays.length + 6,
    'tuning',
  );

  const candidates: TuneCandidate[] = [];
  let engine = options.engine ?? '';
  let model = '';
  let signature: readonly TensorDescriptor[] = [];
  const tryConfig = async (
    config: Config,
    load: Load,
    variant: Variant | undefined = undefined,
  ): Promise<TuneCandidate> => {
    progress.update(
      candidates.length,
      `batch ${config.batchSize}, delay ${config.maxBatchDelayMs} ms, ${config.workers}×${config.threads}` +
        (variant ? `, ${variant.setting}` : ''),
    );
    const opened = await openModelPool({
      url: options.url,
      engine: options.engine,
      overrides: { ...options.overrides, ...variant?.overrides },
      workers: config.workers,
      threads: config.threads,
      batchSize: config.batchSize,
      maxBatchDelayMs: config.maxBatchDelayMs,
      queueSize: Math.max(maxConcurrency * 2, 1000),
      ...(variant?.pinCores === undefined ? {} : { pinCores: variant.pinCores }),
    });
    engine = opened.engine;
    model = opened.model;
    signature = opened.pool.signature()?.inputs ?? signature;
    const inputs = variant?.inputs ?? [input.value];
    let next = 0;
    const predict = () => opened.pool.predict(inputs[next++ % inputs.length]!);
    try {
      // The first runs allocate; they are not part of any level.
      for (let i = 0; i < Math.max(config.workers * 2, inputs.length); i++) await predict();
      const send = async () => void (await predict());
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
        ...(variant ? { setting: variant.setting } : {}),
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
  const extras: TunedExtras = {};
  if (recommended) {
    const config = {
      workers: recommended.workers,
      threads: recommended.threads,
      batchSize: recommended.batchSize,
      maxBatchDelayMs: recommended.maxBatchDelayMs,
    };
    const axes = dynamicAxes(signature);
    if (axes.length > 0 && !options.inputFile) {
      // One request a run has nothing to pad: the default is written as chosen.
      extras.sequences =
        recommended.batchSize > 1 ? await tuneSequences(config, axes) : { batchifier: 'stack' };
    }
    if (declaredKey('cpu_pinning') && process.platform === 'linux') {
      const concurrency = { mode: 'concurrency' } as const;
      const loose = await tryConfig(config, concurrency, { setting: 'unpinned', pinCores: false });
      const pinned = await tryConfig(config, concurrency, {
        setting: 'cpu_pinning=true',
        pinCores: true,
      });
      extras.pinned = higherThroughput(loose, pinned) === pinned;
    }
    if (engine === 'Python' && jemallocInstalled()) {
      const concurrency = { mode: 'concurrency' } as const;
      const variant = (allocator: string): Variant => ({
        setting: `option.allocator=${allocator}`,
        overrides: { 'option.allocator': allocator },
      });
      const glibc = await tryConfig(config, concurrency, variant('default'));
      const jemalloc = await tryConfig(config, concurrency, variant('jemalloc'));
      extras.allocator = higherThroughput(glibc, jemalloc) === jemalloc ? 'jemalloc' : 'default';
    }
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
    properties: recommended ? recommendedProperties(recommended, engine, extras) : {},
    configProperties: recommended ? recommendedConfigProperties(extras) : {},
  };

  /**
   * Step 4: the same configuration under requests of varying lengths, stacked (the default:
   * only equal lengths share a forward) against padded in length buckets; the batchifier
   * keys of the one that wins.
   */
  async function tuneSequences(
    config: Config,
    axes: ReturnType<typeof dynamicAxes>,
  ): Promise<Record<string, string>> {
    const specs = options.inputs ?? specsFromSignature(signature);
    const maxLength = maxLengthOf(specs, axes);
    const inputs = variableLengthInputs(specs, axes, VARIABLE_REQUESTS, maxLength);
    const padAxes = [...new Set(axes.map((a) => a.axis))].sort((a, b) => a - b);
    const bucket = {
      batchifier: 'bucket',
      bucket_boundaries: bucketBoundaries(maxLength).join(','),
      bucket_by: axes[0]!.name,
      ...(padAxes.length === 1 && padAxes[0] === 1 ? {} : { pad_axes: padAxes.join(',') }),
    };
    const lengths = `lengths 1–${maxLength}`;
    const stacked = await tryConfig(
      config,
      { mode: 'concurrency' },
      {
        setting: `batchifier=stack, ${lengths}`,
        overrides: { batchifier: 'stack' },
        inputs,
      },
    );
    const bucketed = await tryConfig(
      config,
      { mode: 'concurrency' },
      {
        setting: `batchifier=bucket, ${lengths}`,
        overrides: bucket,
        inputs,
      },
    );
    return higherThroughput(stacked, bucketed) === bucketed ? bucket : { batchifier: 'stack' };
  }
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
/** Whether Debian's libjemalloc2 is there to be preloaded into worker processes. */
function jemallocInstalled(): boolean {
  try {
    findAllocatorLibrary('jemalloc');
    return true;
  } catch {
    return false;
  }
}

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
