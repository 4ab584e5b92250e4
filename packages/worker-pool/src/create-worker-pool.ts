import type { BucketKey, Clock } from '@kiln/batching';
import {
  CPU,
  type Device,
  KilnError,
  KilnErrorCode,
  type Model,
  type ServingInput,
  type ServingOutput,
  type Translator,
  formatDevice,
  parseDevice,
} from '@kiln/core';
import { InlineBackend } from './inline-backend.js';
import { planRecipe, type PlannedRecipe } from './recipe-plan.js';
import { type WorkerPoolSettingsInput, resolveWorkerPoolSettings } from './settings.js';
import { ThreadBackend } from './thread-backend.js';
import { coresForSlot, planThreads } from './thread-budget.js';
import type { ModelRecipe } from './worker-protocol.js';
import { type BackendFactory, WorkerPool } from './worker-pool.js';

/** A model loaded once on the main thread and shared by inline workers. */
export interface SharedModel<I, O> {
  readonly shared: Model;
  readonly translator: Translator<I, O>;
}

export interface WorkerPoolOptions<M, I = ServingInput> {
  /**
   * A recipe — the pool locates the model once, then runs it the way its engine asks: a
   * blocking engine (ONNX Runtime, TensorFlow) gets a thread per worker, each with its own
   * copy; an async one (LibTorch, Python) is loaded once and shared by workers on this thread
   * — or a model you loaded yourself, shared by workers on this thread.
   */
  readonly model: M;
  /** The model's name in messages and describe(); default: from the URL, or the model's. */
  readonly name?: string;
  readonly settings?: WorkerPoolSettingsInput;
  /** One worker group per device (`cpu`, `gpu0`); default cpu. A shared model runs on its own device. */
  readonly devices?: readonly (Device | string)[];
  /** Time source of the queue and the pool's timers (tests pass a manual clock). */
  readonly clock?: Clock;
  /**
   * Sequence bucketing: only requests of one bucket share a batch (e.g. `lengthBucketer`
   * from @kiln/batching over a request's length).
   */
  readonly bucketOf?: (input: I) => BucketKey | undefined;
}

/** Creates a pool and starts its minimum of workers; rejects if they cannot start. */
export function createWorkerPool(
  options: WorkerPoolOptions<ModelRecipe, ServingInput>,
): Promise<WorkerPool<ServingInput, ServingOutput>>;
export function createWorkerPool<I, O>(
  options: WorkerPoolOptions<SharedModel<I, O>, I>,
): Promise<WorkerPool<I, O>>;
export async function createWorkerPool<I, O>(
  options: WorkerPoolOptions<ModelRecipe, ServingInput> | WorkerPoolOptions<SharedModel<I, O>, I>,
): Promise<WorkerPool<I, O> | WorkerPool<ServingInput, ServingOutput>> {
  if (isShared(options)) {
    const pool = sharedPool(options);
    await pool.start();
    return pool;
  }
  const planned = await planRecipe(options.model);
  if (planned.kind === 'shared') {
    const { model, translator } = planned;
    // The pool disposes the model when it shuts down, as it does when it cannot start.
    const pool = sharedPool({ ...options, model: { shared: model, translator } }, () =>
      model.dispose(),
    );
    await pool.start();
    return pool;
  }
  const pool = threadPool(options, planned);
  await pool.start();
  return pool;
}

function isShared<I, O>(
  options: WorkerPoolOptions<ModelRecipe, ServingInput> | WorkerPoolOptions<SharedModel<I, O>, I>,
): options is WorkerPoolOptions<SharedModel<I, O>, I> {
  return 'shared' in options.model;
}

/** Inline workers over one model loaded on the main thread. */
function sharedPool<I, O>(
  options: WorkerPoolOptions<SharedModel<I, O>, I>,
  release?: () => Promise<void>,
): WorkerPool<I, O> {
  const { shared, translator } = options.model;
  const device = shared.device;
  if (options.devices?.some((d) => formatDevice(toDevice(d)) !== formatDevice(device))) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `a shared model runs on its own device (${formatDevice(device)}) only`,
    );
  }
  return new WorkerPool({
    name: options.name ?? shared.name,
    settings: resolveWorkerPoolSettings(options.settings),
    devices: [device],
    backends: { create: ({ threads }) => new InlineBackend(shared, translator, threads) },
    clock: options.clock,
    bucketOf: options.bucketOf,
    release,
  });
}

/** Thread workers, each loading its own copy of the model from the resolved recipe. */
function threadPool(
  options: WorkerPoolOptions<ModelRecipe, ServingInput>,
  planned: Extract<PlannedRecipe, { kind: 'threads' }>,
): WorkerPool<ServingInput, ServingOutput> {
  const { recipe, sharedHost } = planned;
  const settings = resolveWorkerPoolSettings(options.settings);
  const backends: BackendFactory<ServingInput, ServingOutput> = {
    create: ({ device, slot, label, threads }) => {
      // Pinned cores follow the budget even where the user chose the engine's threads.
      const width = planThreads({ ...threads, userOmpThreads: undefined }).intraOpThreads ?? 1;
      return new ThreadBackend({
        init: {
          recipe,
          device: formatDevice(device),
          threads,
          pinCores:
            settings.pinCores && device.type === 'cpu'
              ? coresForSlot(slot, width, threads.cores)
              : undefined,
          nice: settings.workerNice,
        },
        label,
        transferInputs: settings.transferInputs,
        sharedHost,
      });
    },
  };
  return new WorkerPool({
    name: options.name ?? recipe.load.request.name,
    settings,
    devices: (options.devices ?? [CPU]).map(toDevice),
    backends,
    clock: options.clock,
    bucketOf: options.bucketOf,
  });
}

function toDevice(device: Device | string): Device {
  return typeof device === 'string' ? parseDevice(device) : device;
}
