import { type BucketKey, type Clock, servingBatchKeyOf } from '@kiln/batching';
import {
  CPU,
  type Device,
  KilnError,
  KilnErrorCode,
  type Model,
  type ServingInput,
  type ServingOutput,
  type Translator,
  type WorkerKind,
  formatDevice,
  parseDevice,
  sequenceBatchingFrom,
} from '@kiln/core';
import { InlineBackend } from './inline-backend.js';
import { ServeBackend, serveSettings } from './serve-backend.js';
import type { WorkerBackend } from './worker-backend.js';
import type { PlacementReport } from './pool-description.js';
import { loadRecipeHere, planRecipe, type PlannedRecipe } from './recipe-plan.js';
import {
  type WorkerPoolSettings,
  type WorkerPoolSettingsInput,
  resolveWorkerPoolSettings,
} from './settings.js';
import { ThreadBackend } from './thread-backend.js';
import type { WarmupRequest } from './warm-up.js';
import { type WarmupPlan, servingWarmup, withWarmup } from './warming-backend.js';
import { THREAD_OPTION_KEYS } from './thread-budget.js';
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
  /**
   * Called once a recipe's model is located (archives unpacked, engine picked), as it begins
   * to load: from then on the pool needs little of this thread until its workers are ready.
   */
  readonly onLocated?: () => void;
}

/**
 * Creates a pool and starts its minimum of workers; rejects if they cannot start. A model
 * whose workers decode step by step (`option.rolling_batch`) is refused: its jobs are
 * generations, not tensors (see createGenerationPool).
 */
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
  const planned = await planRecipe(options.model, options.onLocated);
  if (planned.workerKind === 'step') {
    if (planned.kind === 'shared') await planned.model.dispose();
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      'the model generates text step by step (option.rolling_batch): create it with createGenerationPool',
    );
  }
  const properties =
    planned.kind === 'shared' ? planned.model.properties : planned.recipe.load.request.properties;
  // Batch makeup is the queue's: requests go together only when their declared tensors can
  // share a batch under the model's batchifier (a length bucket with batchifier=bucket).
  const sequences = sequenceBatchingFrom(properties.raw);
  const bucketOf =
    options.bucketOf ??
    (planned.workerKind === 'forward' ? servingBatchKeyOf(sequences) : undefined);
  const recipeOptions = bucketOf ? { ...options, bucketOf } : options;
  if (planned.kind === 'shared') {
    const { model, translator } = planned;
    // The pool disposes the model when it shuts down, as it does when it cannot start.
    const pool = sharedPool(
      { ...recipeOptions, model: { shared: model, translator } },
      {
        kind: planned.workerKind,
        release: () => model.dispose(),
        computesElsewhere: true,
        warmup: servingWarmup(warmupRequest(resolveWorkerPoolSettings(options.settings))),
      },
    );
    await pool.start();
    return pool;
  }
  return placeBlockingModel(recipeOptions, planned);
}

/**
 * A blocking engine's model runs on threads, or inline on this thread when asked to
 * (`placement: 'inline'`) or when the first thread worker's probe finds a full batch faster
 * than `inlineForwardLimitUs` (`auto`): a thread hop would cost more than the model.
 */
async function placeBlockingModel(
  options: WorkerPoolOptions<ModelRecipe, ServingInput>,
  planned: Extract<PlannedRecipe, { kind: 'threads' }>,
): Promise<WorkerPool<ServingInput, ServingOutput>> {
  const settings = resolveWorkerPoolSettings(options.settings);
  const blocker = inlineBlocker(options, planned);
  if (settings.placement === 'inline') {
    if (blocker) throw new KilnError(KilnErrorCode.InvalidConfig, `placement=inline: ${blocker}`);
    return startInlinePool(options, planned, settings, { reason: 'placement=inline' });
  }
  const probing = settings.placement === 'auto' && blocker === undefined;
  const pool = threadPool(options, planned, settings, probing);
  await pool.start();
  if (!probing) return pool;
  const probe = pool.forwardProbe();
  const limit = settings.inlineForwardLimitUs;
  if (probe === undefined) return pool;
  if (!('bestUs' in probe)) {
    pool.notePlacement({ kind: 'thread', reason: `not timed: ${probe.skipped}`, probe });
    return pool;
  }
  const timed = `a batch of ${probe.batch} took ${probe.bestUs} µs at best (median ${probe.medianUs} µs) on a thread (inline limit ${limit} µs)`;
  if (probe.bestUs > limit) {
    pool.notePlacement({ kind: 'thread', reason: timed, probe });
    return pool;
  }
  try {
    const inline = await startInlinePool(options, planned, settings, { reason: timed, probe });
    await pool.shutdown();
    return inline;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    pool.notePlacement({ kind: 'thread', reason: `${timed}, but it failed inline: ${why}`, probe });
    return pool;
  }
}

/** Why a blocking model cannot run on this thread, if it cannot. */
function inlineBlocker(
  options: WorkerPoolOptions<ModelRecipe, ServingInput>,
  planned: Extract<PlannedRecipe, { kind: 'threads' }>,
): string | undefined {
  if (planned.sharedHost !== undefined)
    return `${planned.sharedHost} loads in one thread per process, its host thread`;
  if ((options.devices ?? [CPU]).some((d) => toDevice(d).type !== 'cpu'))
    return 'only models on the cpu run inline';
  return undefined;
}

/** One worker on this thread over the model loaded here. */
async function startInlinePool(
  options: WorkerPoolOptions<ModelRecipe, ServingInput>,
  planned: Extract<PlannedRecipe, { kind: 'threads' }>,
  settings: WorkerPoolSettings,
  placement: Omit<PlacementReport, 'kind'>,
): Promise<WorkerPool<ServingInput, ServingOutput>> {
  const engineOptions = planned.recipe.load.request.options;
  const userThreads = THREAD_OPTION_KEYS.some((key) => engineOptions[key] !== undefined);
  // A model small enough to run inline gains nothing from intra-op threads but their wake-ups.
  const threads = settings.threads ?? (userThreads ? undefined : 1);
  const { model, translator } = await loadRecipeHere(planned.recipe, threads);
  const pool = sharedPool(
    {
      ...options,
      model: { shared: model, translator },
      settings: {
        ...settings,
        threads,
        // Workers on one thread run one at a time: a second would only hold a second copy.
        minWorkers: Math.min(settings.minWorkers, 1),
        maxWorkers: 1,
        perDevice: {},
      },
    },
    {
      kind: planned.workerKind,
      release: () => model.dispose(),
      placement: { kind: 'inline', ...placement },
      oneWorker: true,
      warmup: servingWarmup(warmupRequest(settings)),
    },
  );
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
  extra: {
    kind?: WorkerKind;
    release?: () => Promise<void>;
    placement?: PlacementReport;
    oneWorker?: boolean;
    /** The model's engine runs its forward off this thread (see InlineBackend). */
    computesElsewhere?: boolean;
    /** Each worker warms the model up before it is ready (pools of a recipe). */
    warmup?: WarmupPlan<I>;
  } = {},
): WorkerPool<I, O> {
  const { shared, translator } = options.model;
  const device = shared.device;
  if (options.devices?.some((d) => formatDevice(toDevice(d)) !== formatDevice(device))) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `a shared model runs on its own device (${formatDevice(device)}) only`,
    );
  }
  const warm = extra.warmup;
  return new WorkerPool({
    name: options.name ?? shared.name,
    kind: extra.kind,
    settings: serveSettings(resolveWorkerPoolSettings(options.settings), shared),
    devices: [device],
    backends: {
      // Only engines that compute off this thread can pin: the JS thread itself is shared.
      create: ({ threads, cores }) => {
        // A model that serves requests itself (Python mode) gets them as they are.
        const backend: WorkerBackend<I, O> = shared.newServingContext
          ? (new ServeBackend(shared, threads, cores) as unknown as WorkerBackend<I, O>)
          : new InlineBackend(
              shared,
              translator,
              threads,
              extra.computesElsewhere,
              extra.computesElsewhere ? cores : undefined,
            );
        return warm ? withWarmup(backend, warm) : backend;
      },
    },
    clock: options.clock,
    bucketOf: options.bucketOf,
    release: extra.release,
    oneWorker: extra.oneWorker,
    placement: extra.placement ?? {
      kind: 'inline',
      reason: 'the engine runs off the JavaScript thread itself',
    },
  });
}

/** Thread workers, each loading its own copy of the model from the resolved recipe. */
function threadPool(
  options: WorkerPoolOptions<ModelRecipe, ServingInput>,
  planned: Extract<PlannedRecipe, { kind: 'threads' }>,
  settings: WorkerPoolSettings,
  probing: boolean,
): WorkerPool<ServingInput, ServingOutput> {
  const { recipe, sharedHost } = planned;
  let probeAsked = !probing;
  const backends: BackendFactory<ServingInput, ServingOutput> = {
    create: ({ label, device, threads, cores }) => {
      // Only the pool's first worker times the model (placement auto).
      const probe = probeAsked
        ? undefined
        : {
            batchSize: settings.batchSize,
            autoBatchSize: settings.autoBatchSize,
            limitUs: settings.inlineForwardLimitUs,
          };
      probeAsked = true;
      const backend = new ThreadBackend({
        init: {
          recipe,
          device: formatDevice(device),
          threads,
          // A host thread every model of its engine shares cannot take one worker's cores.
          pinCores: sharedHost ? undefined : cores,
          ...(sharedHost && cores
            ? { pinRefused: `${sharedHost} runs every worker on one shared thread` }
            : {}),
          nice: settings.workerNice,
          ...(probe ? { probe } : {}),
        },
        label,
        transferInputs: settings.transferInputs,
        sharedHost,
      });
      return withWarmup(backend, servingWarmup(warmupRequest(settings)));
    },
  };
  return new WorkerPool({
    name: options.name ?? recipe.load.request.name,
    kind: planned.workerKind,
    settings,
    devices: (options.devices ?? [CPU]).map(toDevice),
    backends,
    clock: options.clock,
    bucketOf: options.bucketOf,
    placement: {
      kind: 'thread',
      reason:
        settings.placement === 'thread'
          ? 'placement=thread'
          : (inlineBlocker(options, planned) ?? 'placement=auto: not timed yet'),
    },
  });
}

/** What each worker of a recipe's pool warms up with (warmup_batch_sizes, warmup_shape). */
function warmupRequest(settings: WorkerPoolSettings): WarmupRequest {
  return {
    batchSizes: settings.warmupBatchSizes,
    shape: settings.warmupShape,
    batchSize: settings.batchSize,
    autoBatchSize: settings.autoBatchSize,
  };
}

function toDevice(device: Device | string): Device {
  return typeof device === 'string' ? parseDevice(device) : device;
}
