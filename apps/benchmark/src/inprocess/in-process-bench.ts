import os from 'node:os';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { JobMetrics } from '@kiln/worker-pool';
import { type InputFile, benchInput } from '../inputs/bench-input.js';
import type { InputSpec } from '../options/shapes.js';
import { NO_PROGRESS, type ProgressReporter } from '../progress.js';
import { type InProcessResult, STAGES, type Stage } from '../results.js';
import { LatencyHistogram } from '../stats/latency-histogram.js';
import { openModelPool } from './model-pool.js';
import { ResourceMonitor } from './resource-monitor.js';

export interface InProcessBenchOptions {
  /** `-u`: model URL. */
  readonly url: string;
  /** `-e`: engine name. */
  readonly engine?: string | undefined;
  /** `-s`: input shapes; read from the model's signature when left out. */
  readonly inputs?: readonly InputSpec[] | undefined;
  /** A request body to send instead of synthetic tensors (an image, JSON…). */
  readonly inputFile?: InputFile | undefined;
  /** `-c`: measured requests (ignored when `durationMs` is set). */
  readonly iterations: number;
  /** `-d`: measure for this long instead of a number of requests. */
  readonly durationMs?: number | undefined;
  /** `-t`: workers; ≤ 0 means one per core. */
  readonly workers: number;
  /** `-w`: requests run before measuring, after the first one. */
  readonly warmup: number;
  /** Clients keeping requests in flight; default workers × batch size. */
  readonly concurrency?: number | undefined;
  readonly batchSize?: number | undefined;
  readonly maxBatchDelayMs?: number | undefined;
  /** Intra-op threads per worker. */
  readonly threads?: number | undefined;
  readonly overrides?: Readonly<Record<string, string>> | undefined;
  readonly progress?: ProgressReporter | undefined;
}

/** Workers for `-t`: ≤ 0 means one per core, as djl-bench reads it. */
export function resolveWorkers(threads: number): number {
  return threads <= 0 ? os.availableParallelism() : threads;
}

/**
 * djl-bench in this process: loads the model into a pool of workers (timed), runs one
 * request (first-inference latency), warms up, then keeps `concurrency` requests in flight
 * for `iterations` requests or `durationMs`, recording each request's total latency and the
 * pool's queue, pre-processing, inference and post-processing times.
 */
export async function runInProcessBench(options: InProcessBenchOptions): Promise<InProcessResult> {
  const progress = options.progress ?? NO_PROGRESS;
  const workers = resolveWorkers(options.workers);
  const batchSize = options.batchSize ?? 1;
  const maxBatchDelayMs = options.maxBatchDelayMs ?? 0;
  const concurrency = options.concurrency ?? workers * batchSize;
  const input = await benchInput(options);
  const opened = await openModelPool({
    url: options.url,
    engine: options.engine,
    overrides: options.overrides ?? {},
    workers,
    batchSize,
    maxBatchDelayMs,
    threads: options.threads,
    queueSize: concurrency * 2,
  });
  const { pool } = opened;
  const stages = Object.fromEntries(STAGES.map((s) => [s, new LatencyHistogram()])) as Record<
    Stage,
    LatencyHistogram
  >;
  let recording = false;
  const onJob = (job: JobMetrics) => {
    if (!recording || !job.ok) return;
    stages.queue.record(job.queueMs);
    stages.preprocess.record(job.preprocessMs);
    stages.inference.record(job.inferenceMs);
    stages.postprocess.record(job.postprocessMs);
  };
  pool.on('job', onJob);
  try {
    const first = performance.now();
    await pool.predict(input.value);
    const firstInferenceMs = performance.now() - first;

    await runClients(
      Math.min(concurrency, Math.max(1, options.warmup)),
      options.warmup,
      undefined,
      () => pool.predict(input.value),
      () => undefined,
    );

    const measuring =
      options.durationMs === undefined
        ? `${options.iterations} requests`
        : `${Math.round(options.durationMs / 1000)} s`;
    progress.start(
      options.durationMs ?? options.iterations,
      `measuring ${measuring}`,
      options.durationMs === undefined ? '' : ' ms',
    );
    recording = true;
    const monitor = new ResourceMonitor();
    const started = performance.now();
    const outcome = await runClients(
      concurrency,
      options.durationMs === undefined ? options.iterations : Number.POSITIVE_INFINITY,
      options.durationMs === undefined ? undefined : started + options.durationMs,
      async () => {
        const t0 = performance.now();
        await pool.predict(input.value);
        stages.total.record(performance.now() - t0);
      },
      (done) =>
        progress.update(
          options.durationMs === undefined
            ? done
            : Math.min(options.durationMs, performance.now() - started),
        ),
    );
    const elapsedMs = performance.now() - started;
    recording = false;
    const resources = monitor.stop();
    progress.stop();
    return {
      kind: 'in-process',
      model: opened.model,
      url: options.url,
      engine: opened.engine,
      workers,
      concurrency,
      threads: options.threads,
      batchSize,
      maxBatchDelayMs,
      inputs: input.label,
      loadMs: opened.loadMs,
      firstInferenceMs,
      iterations: outcome.succeeded,
      errors: outcome.failed,
      elapsedMs,
      throughput: elapsedMs > 0 ? (outcome.succeeded * 1000) / elapsedMs : 0,
      latency: Object.fromEntries(
        STAGES.map((s) => [s, stages[s].summary()]),
      ) as InProcessResult['latency'],
      resources,
      firstError: outcome.firstError,
    };
  } finally {
    progress.stop();
    pool.off('job', onJob);
    await opened.close();
  }
}

interface ClientsOutcome {
  readonly succeeded: number;
  readonly failed: number;
  readonly firstError: string | undefined;
}

/**
 * `clients` loops share `total` requests (or run until `deadline`). The first failure is
 * kept; when nothing succeeds at all, it is thrown, so a wrong input fails loudly.
 */
async function runClients(
  clients: number,
  total: number,
  deadline: number | undefined,
  request: () => Promise<unknown>,
  onDone: (done: number) => void,
): Promise<ClientsOutcome> {
  let started = 0;
  let succeeded = 0;
  let failed = 0;
  let firstError: unknown;
  const client = async () => {
    while (started < total && (deadline === undefined || performance.now() < deadline)) {
      started++;
      try {
        await request();
        succeeded++;
      } catch (error) {
        failed++;
        firstError ??= error;
      }
      onDone(succeeded + failed);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, clients) }, client));
  if (succeeded === 0 && failed > 0) throw KilnError.wrap(firstError, KilnErrorCode.Internal);
  const message =
    firstError instanceof Error
      ? firstError.message
      : firstError === undefined
        ? undefined
        : String(firstError);
  return { succeeded, failed, firstError: message };
}
