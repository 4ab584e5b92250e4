import type { ForwardProbe } from './forward-probe.js';
import type { WarmupReport } from './warm-up.js';
import type { WorkerState } from './pool-worker.js';

/** A model's health as DJL's `/ping` and describe report it. */
export type PoolStatus = 'Healthy' | 'Unhealthy' | 'FAILED' | 'PENDING';

export interface WorkerDescription {
  readonly id: number;
  /** ISO time the worker was created. */
  readonly startTime: string;
  readonly status: WorkerState;
  readonly kind: 'thread' | 'inline';
  /** The worker thread's id (thread workers). */
  readonly threadId: number | undefined;
  /** Intra-op threads its engine was asked for; undefined when the user's setting applies. */
  readonly intraOpThreads: number | undefined;
  /** Cores it is pinned to, when pinning is on and worked. */
  readonly pinnedCores: readonly number[] | undefined;
  /** Why pinning did not happen, when it was asked for. */
  readonly pinError: string | undefined;
  /** The thread's niceness, when the pool lowered its priority (see `workerNice`). */
  readonly nice: number | undefined;
  /** Why its priority could not be lowered, when that was asked for. */
  readonly niceError: string | undefined;
  /** What the engine reports about the model this worker runs (once it started). */
  readonly model: Record<string, unknown> | undefined;
  /** The batch sizes its warm-up ran before it was ready, or why it ran none. */
  readonly warmup: WarmupReport | undefined;
}

export interface WorkerGroupDescription {
  readonly device: string;
  readonly minWorkers: number;
  readonly maxWorkers: number;
  readonly workers: readonly WorkerDescription[];
  /** The last reason a worker of this group failed. */
  readonly lastError: string | undefined;
}

/** Where the model's workers run, and why (see WorkerPoolSettings.placement). */
export interface PlacementReport {
  /** `thread`: a thread per worker (or one shared host thread); `inline`: this thread. */
  readonly kind: 'thread' | 'inline';
  readonly reason: string;
  /** The first thread worker's timing of a full batch, when placement was `auto`. */
  readonly probe?: ForwardProbe;
}

/** DJL's describe: batching settings, queue, status and worker groups per device. */
export interface PoolDescription {
  readonly name: string;
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
  readonly maxIdleTimeS: number;
  readonly queueSize: number;
  readonly queued: number;
  readonly status: PoolStatus;
  readonly placement: PlacementReport;
  readonly workerGroups: readonly WorkerGroupDescription[];
}

/** Counters since the pool started. */
export interface PoolTotals {
  /** Jobs accepted into the queue. */
  accepted: number;
  /** Jobs answered with an output. */
  succeeded: number;
  /** Jobs that ran and failed (their own error or their worker's crash). */
  failed: number;
  /** Jobs refused at submit (queue full, closed, no worker) or failed before running. */
  rejected: number;
  /** Jobs past their deadline, queued or running. */
  expired: number;
  cancelled: number;
  /** Executions. */
  batches: number;
  /** Workers that crashed or failed as a whole while serving. */
  crashes: number;
  /** Workers that could not start. */
  startFailures: number;
}

/** A snapshot for metrics. */
export interface PoolStats {
  readonly queueDepth: number;
  readonly queueCapacity: number;
  /** Live workers per state (stopped and failed workers are gone, so those count 0). */
  readonly workers: Readonly<Record<WorkerState, number>>;
  readonly totals: Readonly<PoolTotals>;
}
