import os from 'node:os';
import {
  type DeviceType,
  KilnError,
  KilnErrorCode,
  SERVING_DEFAULTS,
  type ServingProperties,
} from '@kiln/core';
import { parseWarmupBatchSizes, parseWarmupShape } from './warm-up.js';

/** How many workers a device's group may run. */
export interface WorkerLimits {
  readonly minWorkers: number;
  readonly maxWorkers: number;
}

/** Everything a pool is tuned by; DJL's serving.properties names in the comments. */
export interface WorkerPoolSettings {
  /** `minWorkers`: workers each device keeps, idle or not. */
  readonly minWorkers: number;
  /**
   * `maxWorkers`: most workers per device. Unset: one per core on cpu, two per GPU (DJL's
   * defaults).
   */
  readonly maxWorkers: number | undefined;
  /** `batch_size`: most jobs one execution takes. */
  readonly batchSize: number;
  /** `max_batch_delay` (ms): how long a worker waits to fill a batch once a job is there. */
  readonly maxBatchDelayMs: number;
  /**
   * Adaptive batching for pools whose batch size nobody chose: once the first worker reports
   * the model's inputs, and every one has a batch axis (a dynamic first dimension), workers
   * take up to this many waiting jobs per run without waiting for more (Triton's dynamic
   * batcher with a queue delay of 0): an idle model answers at once, a busy one batches.
   * `batchSize` and `maxBatchDelayMs` apply until then and to models without a batch axis.
   */
  readonly autoBatchSize: number | undefined;
  /**
   * `placement`: where a blocking engine's workers run. `thread`: each on a thread of its own.
   * `inline`: one worker on the calling thread, for models too small to be worth a thread hop
   * (it blocks that thread while it runs). `auto` (default): the first worker times a full
   * batch on its thread (`forwardProbe`); a model whose median run takes at most
   * `inlineForwardLimitUs` is moved to the calling thread, any other stays on threads.
   * Async engines (LibTorch, Python) always run on the calling thread.
   */
  readonly placement: Placement;
  /**
   * `inline_forward_limit_us`: the longest full-batch run `auto` places inline, µs. The
   * default, 400, leaves 2.5× for a busy machine inside a 1 ms block of the event loop.
   */
  readonly inlineForwardLimitUs: number;
  /**
   * `warmup_batch_sizes`: each worker runs its model at these batch sizes on zeros before it
   * reports ready (empty: no warm-up). Undefined: 1 and the batch size the pool runs (the
   * adaptive one for a model with a batch axis). Pools over a model you loaded yourself skip it.
   */
  readonly warmupBatchSizes: readonly number[] | undefined;
  /** `warmup_shape`: one warm-up request's input shapes (`1,128|1,128`); default: declared. */
  readonly warmupShape: string | undefined;
  /** `job_queue_size`: jobs waiting at most; more are refused with QUEUE_FULL. */
  readonly jobQueueSize: number;
  /** `max_idle_time` (s): a worker above `minWorkers` idle this long exits. */
  readonly maxIdleTimeS: number;
  /** Default limit per job from acceptance to answer (ms); none when undefined. */
  readonly predictTimeoutMs: number | undefined;
  /** Intra-op threads per worker; when undefined the pool budgets the cores itself. */
  readonly threads: number | undefined;
  /** Cores the pool may use; defaults to what this process may run on. */
  readonly cores: number;
  /**
   * Pin each CPU worker and its engine's threads to cores of its own (Linux; TorchServe's
   * `cpu_launcher_enable`): physical cores from /sys, split evenly between the workers.
   */
  readonly pinCores: boolean;
  /** With `pinCores`: hyperthread siblings count as cores (`--use_logical_core`). */
  readonly pinLogicalCores: boolean;
  /** With `pinCores`: only this NUMA node's cores (`--node_id`). */
  readonly pinNode: number | undefined;
  /** With `pinCores`: split the cores into this many sets (`--ninstances`; default: maxWorkers). */
  readonly pinInstances: number | undefined;
  /**
   * Thread workers run this many steps nicer than the process (Linux), so that the main
   * thread's routing preempts inference when the cores are oversubscribed; 0 turns it off.
   */
  readonly workerNice: number;
  /** A worker not ready after this long (ms) is stopped and counted as failed to start. */
  readonly startTimeoutMs: number;
  /**
   * A worker whose run goes on this long (ms) after every job in it was answered (timed out
   * or cancelled) is terminated and replaced: an engine stuck in a loop costs a worker's
   * time, not the worker.
   */
  readonly hungRunTimeoutMs: number;
  /**
   * Move request buffers to worker threads instead of copying them. The caller's views then
   * become empty: turn on only when nothing reads an input after submitting it (a server's
   * request bodies). Batches of several requests are copied all the same: should their thread
   * die, they run again on another.
   */
  readonly transferInputs: boolean;
  /** `cpu.minWorkers`, `gpu.maxWorkers`…: limits of one device type's groups. */
  readonly perDevice: Readonly<Partial<Record<DeviceType, Partial<WorkerLimits>>>>;
}

export type WorkerPoolSettingsInput = Partial<WorkerPoolSettings>;

export const PLACEMENTS = ['auto', 'thread', 'inline'] as const;
export type Placement = (typeof PLACEMENTS)[number];

/** Workers per GPU when none is configured (DJL's default). */
export const DEFAULT_GPU_MAX_WORKERS = 2;

/** The most steps nicer a worker can run: Linux's niceness ends at 19. */
export const MAX_WORKER_NICE = 19;

export const WORKER_POOL_DEFAULTS = {
  batchSize: SERVING_DEFAULTS.batchSize,
  maxBatchDelayMs: SERVING_DEFAULTS.maxBatchDelayMs,
  jobQueueSize: SERVING_DEFAULTS.jobQueueSize,
  maxIdleTimeS: SERVING_DEFAULTS.maxIdleTimeS,
  minWorkers: 1,
  startTimeoutMs: 120_000,
  hungRunTimeoutMs: 10_000,
  workerNice: 5,
  placement: 'auto',
  inlineForwardLimitUs: 400,
} as const;

/** Fills defaults and checks every value; a bad one is an INVALID_CONFIG KilnError. */
export function resolveWorkerPoolSettings(input: WorkerPoolSettingsInput = {}): WorkerPoolSettings {
  const cores = integer('cores', input.cores ?? os.availableParallelism(), 1);
  const minWorkers = integer('minWorkers', input.minWorkers ?? WORKER_POOL_DEFAULTS.minWorkers, 0);
  const maxWorkers =
    input.maxWorkers === undefined ? undefined : integer('maxWorkers', input.maxWorkers, 0);
  if (maxWorkers !== undefined) checkLimits('', { minWorkers, maxWorkers });
  const perDevice: Partial<Record<DeviceType, Partial<WorkerLimits>>> = {};
  for (const [type, limits] of Object.entries(input.perDevice ?? {}) as [
    DeviceType,
    Partial<WorkerLimits>,
  ][]) {
    if (type !== 'cpu' && type !== 'gpu') {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `perDevice names an unknown device type ${JSON.stringify(type)}`,
      );
    }
    const entry: { minWorkers?: number; maxWorkers?: number } = {};
    if (limits.minWorkers !== undefined)
      entry.minWorkers = integer(`${type}.minWorkers`, limits.minWorkers, 0);
    if (limits.maxWorkers !== undefined)
      entry.maxWorkers = integer(`${type}.maxWorkers`, limits.maxWorkers, 0);
    perDevice[type] = entry;
  }
  return {
    batchSize: integer('batchSize', input.batchSize ?? WORKER_POOL_DEFAULTS.batchSize, 1),
    maxBatchDelayMs: integer(
      'maxBatchDelayMs',
      input.maxBatchDelayMs ?? WORKER_POOL_DEFAULTS.maxBatchDelayMs,
      0,
    ),
    autoBatchSize:
      input.autoBatchSize === undefined
        ? undefined
        : integer('autoBatchSize', input.autoBatchSize, 1),
    placement: parsePlacement(input.placement ?? WORKER_POOL_DEFAULTS.placement),
    inlineForwardLimitUs: integer(
      'inlineForwardLimitUs',
      input.inlineForwardLimitUs ?? WORKER_POOL_DEFAULTS.inlineForwardLimitUs,
      0,
    ),
    warmupBatchSizes: input.warmupBatchSizes?.map((size) => integer('warmupBatchSizes', size, 1)),
    warmupShape: input.warmupShape,
    jobQueueSize: integer(
      'jobQueueSize',
      input.jobQueueSize ?? WORKER_POOL_DEFAULTS.jobQueueSize,
      1,
    ),
    maxIdleTimeS: nonNegative(
      'maxIdleTimeS',
      input.maxIdleTimeS ?? WORKER_POOL_DEFAULTS.maxIdleTimeS,
    ),
    predictTimeoutMs:
      input.predictTimeoutMs === undefined
        ? undefined
        : nonNegative('predictTimeoutMs', input.predictTimeoutMs),
    threads: input.threads === undefined ? undefined : integer('threads', input.threads, 1),
    cores,
    pinCores: input.pinCores ?? false,
    pinLogicalCores: input.pinLogicalCores ?? false,
    pinNode: input.pinNode === undefined ? undefined : integer('pinNode', input.pinNode, 0),
    pinInstances:
      input.pinInstances === undefined ? undefined : integer('pinInstances', input.pinInstances, 1),
    workerNice: atMost(
      MAX_WORKER_NICE,
      integer('workerNice', input.workerNice ?? WORKER_POOL_DEFAULTS.workerNice, 0),
      'workerNice',
    ),
    startTimeoutMs: integer(
      'startTimeoutMs',
      input.startTimeoutMs ?? WORKER_POOL_DEFAULTS.startTimeoutMs,
      1,
    ),
    hungRunTimeoutMs: integer(
      'hungRunTimeoutMs',
      input.hungRunTimeoutMs ?? WORKER_POOL_DEFAULTS.hungRunTimeoutMs,
      1,
    ),
    transferInputs: input.transferInputs ?? false,
    minWorkers,
    maxWorkers,
    perDevice,
  };
}

/**
 * The limits of one device type's groups: the `cpu.`/`gpu.` values where given, else the
 * pool's own, else DJL's defaults (one worker per core on cpu, two per GPU), never below the
 * minimum.
 */
export function workerLimitsFor(settings: WorkerPoolSettings, type: DeviceType): WorkerLimits {
  const own = settings.perDevice[type] ?? {};
  const minWorkers = own.minWorkers ?? settings.minWorkers;
  const fallback = type === 'gpu' ? DEFAULT_GPU_MAX_WORKERS : settings.cores;
  const limits = {
    minWorkers,
    maxWorkers: own.maxWorkers ?? settings.maxWorkers ?? Math.max(minWorkers, fallback),
  };
  checkLimits(`${type}.`, limits);
  return limits;
}

/**
 * Pool settings written in a model's serving.properties: `batch_size`, `max_batch_delay`,
 * `job_queue_size`, `max_idle_time`, `minWorkers`, `maxWorkers` and their `cpu.`/`gpu.`
 * variants, `placement`, `inline_forward_limit_us`, `worker_nice`, `cpu_pinning`,
 * `cpu_pinning_logical_cores` and `cpu_pinning_node`. Keys left out stay unset so that other
 * sources (server defaults) may fill them.
 */
export function workerPoolSettingsFromProperties(
  properties: ServingProperties,
): WorkerPoolSettingsInput {
  const raw = properties.raw;
  const settings: { -readonly [K in keyof WorkerPoolSettings]?: WorkerPoolSettings[K] } = {};
  if (raw.batch_size !== undefined) settings.batchSize = properties.batchSize;
  if (raw.max_batch_delay !== undefined) settings.maxBatchDelayMs = properties.maxBatchDelayMs;
  if (raw.job_queue_size !== undefined) settings.jobQueueSize = properties.jobQueueSize;
  if (raw.placement !== undefined)
    settings.placement = parsePlacement(raw.placement.trim(), 'serving.properties placement');
  const limit = propertyInt(raw, 'inline_forward_limit_us');
  if (limit !== undefined) settings.inlineForwardLimitUs = limit;
  const nice = propertyInt(raw, 'worker_nice');
  if (nice !== undefined)
    settings.workerNice = atMost(MAX_WORKER_NICE, nice, 'serving.properties worker_nice');
  if (raw.max_idle_time !== undefined) settings.maxIdleTimeS = properties.maxIdleTimeS;
  if (raw.warmup_batch_sizes !== undefined && raw.warmup_batch_sizes.trim() !== '')
    settings.warmupBatchSizes = parseWarmupBatchSizes(raw.warmup_batch_sizes);
  if (raw.warmup_shape !== undefined && raw.warmup_shape.trim() !== '') {
    parseWarmupShape(raw.warmup_shape);
    settings.warmupShape = raw.warmup_shape.trim();
  }
  if (properties.minWorkers !== undefined) settings.minWorkers = properties.minWorkers;
  if (properties.maxWorkers !== undefined) settings.maxWorkers = properties.maxWorkers;
  const perDevice: Partial<Record<DeviceType, Partial<WorkerLimits>>> = {};
  for (const type of ['cpu', 'gpu'] as const) {
    const min = propertyInt(raw, `${type}.minWorkers`);
    const max = propertyInt(raw, `${type}.maxWorkers`);
    if (min === undefined && max === undefined) continue;
    perDevice[type] = {
      ...(min === undefined ? {} : { minWorkers: min }),
      ...(max === undefined ? {} : { maxWorkers: max }),
    };
  }
  if (Object.keys(perDevice).length > 0) settings.perDevice = perDevice;
  const pin = propertySwitch(raw, 'cpu_pinning');
  if (pin !== undefined) settings.pinCores = pin;
  const logical = propertySwitch(raw, 'cpu_pinning_logical_cores');
  if (logical !== undefined) settings.pinLogicalCores = logical;
  const node = propertyInt(raw, 'cpu_pinning_node');
  if (node !== undefined) settings.pinNode = node;
  return settings;
}

function propertySwitch(raw: Readonly<Record<string, string>>, key: string): boolean | undefined {
  const text = raw[key]?.trim().toLowerCase();
  if (text === undefined || text === '') return undefined;
  if (text === 'true' || text === 'false') return text === 'true';
  throw new KilnError(
    KilnErrorCode.InvalidConfig,
    `serving.properties ${key}=${raw[key]} must be true or false`,
  );
}

function propertyInt(raw: Readonly<Record<string, string>>, key: string): number | undefined {
  const text = raw[key];
  if (text === undefined || text.trim() === '') return undefined;
  return integer(`serving.properties ${key}`, Number(text.trim()), 0);
}

function checkLimits(prefix: string, limits: WorkerLimits): void {
  if (limits.minWorkers > limits.maxWorkers) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${prefix}minWorkers (${limits.minWorkers}) must not exceed ${prefix}maxWorkers (${limits.maxWorkers})`,
    );
  }
}

/** A placement named in configuration; anything else is INVALID_CONFIG naming `name`. */
export function parsePlacement(value: string, name = 'placement'): Placement {
  if (!(PLACEMENTS as readonly string[]).includes(value)) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${name} must be one of ${PLACEMENTS.join(', ')} (got ${JSON.stringify(value)})`,
    );
  }
  return value as Placement;
}

function integer(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${name} must be an integer ≥ ${min} (got ${String(value)})`,
    );
  }
  return value;
}

/** `value` when it is at most `max`; else INVALID_CONFIG naming `name`. */
function atMost(max: number, value: number, name: string): number {
  if (value > max) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${name} must be at most ${max} (got ${value})`,
    );
  }
  return value;
}

function nonNegative(name: string, value: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${name} must be a number ≥ 0 (got ${String(value)})`,
    );
  }
  return value;
}
