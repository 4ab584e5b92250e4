import type { ServingInput, ServingOutput, WorkerKind } from '@kiln/core';
import type {
  GenerationPool,
  ModelSignature,
  PoolDescription,
  WorkerPool,
} from '@kiln/worker-pool';

/** What serves a model: a pool of workers of the kind its engine runs it with. */
export type ModelPool = WorkerPool<ServingInput, ServingOutput> | GenerationPool;

/** A model version's lifecycle; `/ping` reports Healthy/Unhealthy for READY ones from their pool. */
export type ModelState = 'PENDING' | 'READY' | 'FAILED' | 'UNLOADING';

/** One registered version of a model. */
export interface ModelEntry {
  readonly name: string;
  /** '' when the model was registered without a version. */
  readonly version: string;
  readonly url: string;
  readonly engineName: string | undefined;
  readonly registeredAt: Date;
  state: ModelState;
  /** Why loading failed, for FAILED models. */
  error: string | undefined;
  /** serving.properties keys that do nothing as written (unknown, unsupported), one line each. */
  settingWarnings?: readonly string[];
  loadTimeMs: number | undefined;
  /**
   * What its workers run, known from its serving.properties at registration: `step` for text
   * generation (option.rolling_batch), else the engine's kind once its pool runs.
   */
  kind: WorkerKind | undefined;
  pool: ModelPool | undefined;
  signature: ModelSignature | undefined;
  /** Settled when loading ends, either way. */
  loading: Promise<void>;
  /**
   * Settled once the model is located and its workers begin to load, or when loading ends:
   * from then on its load needs little of the main thread.
   */
  located: Promise<void>;
}

/** DJL's `/ping` status of a model version. */
export function pingStatus(entry: ModelEntry): 'Healthy' | 'Unhealthy' | 'FAILED' | 'PENDING' {
  if (entry.state === 'FAILED') return 'FAILED';
  if (entry.state === 'PENDING') return 'PENDING';
  if (entry.state === 'UNLOADING' || !entry.pool) return 'Unhealthy';
  const status = entry.pool.status();
  return status === 'Healthy' ? 'Healthy' : status === 'FAILED' ? 'FAILED' : 'Unhealthy';
}

/** DJL's describe-model answer for one version. */
export interface ModelDescription {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly modelUrl: string;
  readonly engine: string | undefined;
  /** What its workers run: forward (tensor batches), serve (requests) or step (generation). */
  readonly workerKind: WorkerKind | undefined;
  readonly status: string;
  readonly loadTimeMs: number | undefined;
  readonly error: string | undefined;
  readonly batchSize: number | undefined;
  readonly maxBatchDelay: number | undefined;
  readonly maxIdleTime: number | undefined;
  readonly queueSize: number | undefined;
  readonly requestInQueue: number | undefined;
  /** Where the workers run (threads or the main thread) and why. */
  readonly placement: PoolDescription['placement'] | undefined;
  readonly workerGroups: PoolDescription['workerGroups'];
  readonly inputs: ModelSignature['inputs'] | undefined;
  readonly outputs: ModelSignature['outputs'] | undefined;
}

export function describeEntry(entry: ModelEntry): ModelDescription {
  const pool = entry.pool?.describe();
  return {
    modelName: entry.name,
    modelVersion: entry.version,
    modelUrl: entry.url,
    engine: entry.signature?.engine ?? entry.engineName,
    workerKind: entry.pool?.kind ?? entry.kind,
    status: pingStatus(entry),
    loadTimeMs: entry.loadTimeMs,
    error: entry.error,
    batchSize: pool?.batchSize,
    maxBatchDelay: pool?.maxBatchDelayMs,
    maxIdleTime: pool?.maxIdleTimeS,
    queueSize: pool?.queueSize,
    requestInQueue: pool?.queued,
    placement: pool?.placement,
    workerGroups: pool?.workerGroups ?? [],
    inputs: entry.signature?.inputs,
    outputs: entry.signature?.outputs,
  };
}

/** The pool of a text-generation model, whose jobs are tokenized prompts. */
export function isGenerationPool(pool: ModelPool | undefined): pool is GenerationPool {
  return pool?.kind === 'step';
}
