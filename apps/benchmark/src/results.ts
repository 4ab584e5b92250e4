import type { ServerSplit } from './http/server-split.js';
import type { ResourceUsage } from './inprocess/resource-monitor.js';
import type { LatencySummary } from './stats/latency-histogram.js';

/** The stages a request passes through; `total` is what the client saw. */
export const STAGES = ['total', 'queue', 'preprocess', 'inference', 'postprocess'] as const;
export type Stage = (typeof STAGES)[number];

/** djl-bench's report: one model run in this process by a pool of workers. */
export interface InProcessResult {
  readonly kind: 'in-process';
  readonly model: string;
  readonly url: string;
  readonly engine: string;
  readonly workers: number;
  /** Clients keeping requests in flight. */
  readonly concurrency: number;
  readonly threads: number | undefined;
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
  /** `-s` text, or the input file's name. */
  readonly inputs: string;
  readonly loadMs: number;
  readonly firstInferenceMs: number;
  /** Requests measured (after warm-up). */
  readonly iterations: number;
  readonly errors: number;
  readonly elapsedMs: number;
  /** Requests per second over the measured run. */
  readonly throughput: number;
  readonly latency: Readonly<Record<Stage, LatencySummary>>;
  readonly resources: ResourceUsage;
  readonly firstError: string | undefined;
}

/** One load level of an HTTP or tuning sweep. */
export interface LevelResult {
  /** Concurrency, or requests per second in rate mode. */
  readonly level: number;
  readonly throughput: number;
  readonly requests: number;
  readonly errors: number;
  readonly latency: LatencySummary;
  readonly stable: boolean;
  readonly windows: number;
  /** The server's own split of the time, when its metrics were read. */
  readonly server: ServerSplit | undefined;
  readonly firstError: string | undefined;
}

export type LoadMode = 'concurrency' | 'rate';

/** A sweep against a running server. */
export interface HttpResult {
  readonly kind: 'http';
  readonly server: string;
  readonly model: string;
  readonly protocol: string;
  readonly mode: LoadMode;
  readonly inputs: string;
  readonly windowMs: number;
  readonly levels: readonly LevelResult[];
}

/** One configuration tried by `--tune`. */
export interface TuneCandidate {
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
  readonly workers: number;
  readonly threads: number;
  /** What a later step changed on the recommended configuration (`batchifier=bucket, …`). */
  readonly setting?: string;
  /** How it was loaded: closed-loop clients (levels are concurrencies) or a fixed request rate. */
  readonly load: LoadMode;
  /** The levels measured for it. */
  readonly levels: readonly LevelResult[];
  /** Its highest-throughput level within the latency budget, if any. */
  readonly best: LevelResult | undefined;
}

export interface TuneResult {
  readonly kind: 'tune';
  readonly model: string;
  readonly url: string;
  readonly engine: string;
  readonly inputs: string;
  /** P99 latency the recommendation must stay within, ms; undefined = throughput only. */
  readonly latencyBudgetMs: number | undefined;
  readonly candidates: readonly TuneCandidate[];
  readonly recommended: TuneCandidate | undefined;
  /** The serving.properties lines recommended, in order. */
  readonly properties: Readonly<Record<string, string>>;
  /** config.properties lines recommended (server-wide keys), in order. */
  readonly configProperties: Readonly<Record<string, string>>;
}

export type BenchResult = InProcessResult | HttpResult | TuneResult;
