import os from 'node:os';
import {
  KilnError,
  KilnErrorCode,
  type ServingInput,
  type ServingOutput,
  type TensorDescriptor,
  inspectModelSource,
} from '@kiln/core';
import { type EngineCatalog, loadEngineCatalog } from '@kiln/server';
import { type WorkerPool, type WorkerPoolSettingsInput, createWorkerPool } from '@kiln/worker-pool';

export interface ModelPoolOptions {
  /** Model URL as `loadModel` reads it (`[name[:version[:engine[:device]]]]=url` or a path). */
  readonly url: string;
  /** Engine to use instead of the one serving.properties names or the files suggest. */
  readonly engine?: string | undefined;
  /** serving.properties keys that win over the model's own. */
  readonly overrides?: Readonly<Record<string, string>>;
  readonly workers: number;
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
  /** Intra-op threads per worker; the pool divides the cores when unset. */
  readonly threads?: number | undefined;
  /** Jobs that may wait; at least the clients the benchmark runs. */
  readonly queueSize: number;
  /** Pin each worker to cores of its own (Linux); the pool's default when unset. */
  readonly pinCores?: boolean;
}

/** A model served by a worker pool in this process, as the server would serve it. */
export interface ModelPool {
  readonly pool: WorkerPool<ServingInput, ServingOutput>;
  readonly model: string;
  readonly engine: string;
  /** From starting the pool until every worker had loaded the model, ms. */
  readonly loadMs: number;
  close(): Promise<void>;
}

let catalog: Promise<EngineCatalog> | undefined;

/** The installed Kiln engines, imported once per process. */
export function engineCatalog(): Promise<EngineCatalog> {
  catalog ??= loadEngineCatalog();
  return catalog;
}

/** serving.properties overrides carrying the engine choice. */
export function modelOverrides(
  options: Pick<ModelPoolOptions, 'engine' | 'overrides'>,
): Record<string, string> {
  return { ...options.overrides, ...(options.engine ? { engine: options.engine } : {}) };
}

/**
 * Starts a pool of `workers` for a model and waits until all of them have loaded it.
 */
export async function openModelPool(options: ModelPoolOptions): Promise<ModelPool> {
  const engines = await engineCatalog();
  const overrides = modelOverrides(options);
  const inspection = await inspectModelSource(options.url, {
    registry: engines.registry,
    overrides,
  });
  if (inspection.engineName === undefined) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `no installed engine recognises the files of ${options.url} (${inspection.files.slice(0, 5).join(', ')})`,
      { details: { hint: 'name the engine with -e, e.g. -e OnnxRuntime' } },
    );
  }
  const settings: WorkerPoolSettingsInput = {
    minWorkers: options.workers,
    maxWorkers: options.workers,
    batchSize: options.batchSize,
    maxBatchDelayMs: options.maxBatchDelayMs,
    jobQueueSize: Math.max(1, options.queueSize),
    maxIdleTimeS: 3600,
    cores: os.availableParallelism(),
    ...(options.threads === undefined ? {} : { threads: options.threads }),
    ...(options.pinCores === undefined ? {} : { pinCores: options.pinCores }),
  };
  const started = performance.now();
  // The pool runs the model as its engine asks: a thread per worker, or one shared copy.
  const pool = await createWorkerPool({
    name: inspection.name,
    model: { url: options.url, engines: engines.modules, overrides },
    settings,
  });
  const loadMs = performance.now() - started;
  return {
    pool,
    model: inspection.name,
    engine: inspection.engineName,
    loadMs,
    close: () => pool.shutdown({ drain: false, timeoutMs: 10_000 }),
  };
}

/**
 * A model's declared inputs, as a one-worker pool's engine reports them: engines load where
 * the pool runs them, never on this thread (tfjs-node loads in one thread per process).
 */
export async function modelSignature(
  url: string,
  options: Pick<ModelPoolOptions, 'engine' | 'overrides'>,
): Promise<readonly TensorDescriptor[]> {
  const engines = await engineCatalog();
  const pool = await createWorkerPool({
    model: { url, engines: engines.modules, overrides: modelOverrides(options) },
    settings: { minWorkers: 1, maxWorkers: 1 },
  });
  try {
    return pool.signature()?.inputs ?? [];
  } finally {
    await pool.shutdown({ drain: false });
  }
}
