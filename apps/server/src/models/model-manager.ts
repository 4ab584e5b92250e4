import os from 'node:os';
import { fileURLToPath } from 'node:url';
import {
  KilnError,
  KilnErrorCode,
  type ServingInput,
  type ServingOutput,
  inspectModelSource,
  parseModelUrl,
  wantsRollingBatch,
} from '@kiln/core';
import type { JobHandle, JobOptions } from '@kiln/batching';
import {
  type GenerationPool,
  type WorkerPool,
  type WorkerPoolSettingsInput,
  createGenerationPool,
  createWorkerPool,
  workerPoolSettingsFromProperties,
} from '@kiln/worker-pool';
import type { Logger } from 'pino';
import type { ServerConfig } from '../config/server-config.js';
import type { CpuLauncher } from '../config/cpu-launcher.js';
import { checkModelFilesInside } from '../security/model-files.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import { GenerationMetrics } from '../generation/generation-metrics.js';
import type { EngineCatalog } from './engine-catalog.js';
import {
  type ModelDescription,
  type ModelEntry,
  type ModelPool,
  describeEntry,
  isGenerationPool,
} from './model-entry.js';
import { watchPool } from './pool-metrics.js';
import { EventLoopPinning } from './event-loop-pinning.js';

/** serving.properties' `engine=` of Python mode (the engine is an optional package). */
const PYTHON_ENGINE = 'Python';

export interface RegisterRequest {
  /** DJL model URL: `[name[:version[:engine[:device]]]]=url`. */
  readonly url: string;
  readonly name?: string;
  readonly version?: string;
  readonly engine?: string;
  readonly batchSize?: number;
  readonly maxBatchDelayMs?: number;
  readonly minWorkers?: number;
  readonly maxWorkers?: number;
  readonly jobQueueSize?: number;
  /** Folder every file of the model must resolve into (default: the model's own location). */
  readonly root?: string;
}

/**
 * Every model the server serves, by name and version. Loading happens in the background:
 * a model is PENDING until its workers run, then READY, or FAILED with the reason while the
 * other models keep serving.
 */
export class ModelManager {
  private readonly models = new Map<string, Map<string, ModelEntry>>();
  private readonly defaults = new Map<string, string>();
  private readonly registrationListeners = new Set<(entry: ModelEntry) => void>();
  readonly generationMetrics: GenerationMetrics;

  constructor(
    private readonly config: ServerConfig,
    private readonly engines: EngineCatalog,
    private readonly metrics: ServerMetrics,
    private readonly log?: Logger,
  ) {
    this.generationMetrics = new GenerationMetrics(metrics);
  }

  /** Where the event loop runs: off the cores of pinned models' workers (cpu_launcher_enable). */
  private readonly eventLoop = new EventLoopPinning();

  /** The cores the event loop is kept on, when models' pinning left some free. */
  get eventLoopCores(): readonly number[] | undefined {
    return this.eventLoop.cores;
  }

  /** Re-pins the event loop to the cores no loaded model's workers were given. */
  private placeEventLoop(): void {
    const loaded = this.list().filter((e) => e.state === 'READY' || e.state === 'UNLOADING');
    try {
      this.eventLoop.update(loaded.map((e) => e.pool?.reservedCores()));
    } catch {
      this.eventLoop.release();
    }
    const last = this.eventLoop.last;
    if (last && !last.pinned) this.log?.warn({ reason: last.reason }, 'event loop not pinned');
  }

  /** Whether a model of this name is registered (for bounded metric labels). */
  has(name: string): boolean {
    return this.models.has(name);
  }

  /**
   * Registers a model and starts loading it; resolves once it is registered (PENDING), or
   * once it is loaded when `synchronous`. A name/version already taken is refused.
   */
  async register(
    request: RegisterRequest,
    options: {
      synchronous?: boolean;
      /**
       * false: a synchronous registration whose model fails to load is removed before the
       * error is thrown (by default the model stays, FAILED, for GET /models to show).
       */
      keepFailed?: boolean;
    } = {},
  ): Promise<ModelEntry> {
    const parsed = parseModelUrl(request.url);
    const location = localPath(parsed.url);
    if (location !== undefined) checkModelFilesInside(location, request.root ?? location);
    this.checkWorkerLimits({ minWorkers: request.minWorkers, maxWorkers: request.maxWorkers });
    const inspection = await inspectModelSource(request.url, {
      registry: this.engines.registry,
      overrides: this.overrides(request),
      ...this.sourceOptions(),
      ...(request.root === undefined ? {} : { root: request.root }),
    });
    // option.model_id's folder is held to what the model's own folder is held to.
    if (inspection.fromModelId)
      checkModelFilesInside(inspection.dir, request.root ?? inspection.dir);
    const name = request.name ?? parsed.name ?? inspection.name;
    const version = request.version ?? parsed.version ?? inspection.version ?? '';
    if (!MODEL_NAME.test(name)) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `model name ${JSON.stringify(name)} must be letters, digits, '_', '.' or '-'`,
      );
    }
    const versions = this.models.get(name) ?? new Map<string, ModelEntry>();
    if (versions.has(version)) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `model ${name}${version ? ` version ${version}` : ''} is already registered`,
      );
    }
    const entry: ModelEntry = {
      name,
      version,
      url: request.url,
      engineName: inspection.engineName,
      registeredAt: new Date(),
      state: 'PENDING',
      error: undefined,
      loadTimeMs: undefined,
      kind: wantsRollingBatch(inspection.properties) ? 'step' : undefined,
      pool: undefined,
      signature: undefined,
      loading: Promise.resolve(),
      located: Promise.resolve(),
    };
    entry.settingWarnings = inspection.settings.warnings.map(
      (w) => `serving.properties of ${name}: ${w.message}`,
    );
    for (const [i, { key, suggestion }] of inspection.settings.warnings.entries())
      this.log?.warn({ model: name, key, suggestion }, entry.settingWarnings[i]);
    const fromProperties = workerPoolSettingsFromProperties(inspection.properties);
    this.checkWorkerLimits({
      ...fromProperties,
      ...Object.fromEntries(
        Object.entries(fromProperties.perDevice ?? {}).flatMap(([type, l]) => [
          [`${type}.minWorkers`, l?.minWorkers],
          [`${type}.maxWorkers`, l?.maxWorkers],
        ]),
      ),
    });
    const chosen: WorkerPoolSettingsInput = {
      ...this.configDefaults(),
      ...fromProperties,
      ...this.requestSettings(request),
    };
    const autoBatchSize = this.config.modelDefaults.autoBatchSize;
    const settings: WorkerPoolSettingsInput = {
      ...chosen,
      // Nobody chose a batch size: batch whatever waits, once the model shows a batch axis.
      ...(chosen.batchSize === undefined && autoBatchSize > 0 ? { autoBatchSize } : {}),
      predictTimeoutMs: this.config.predictTimeoutMs,
      transferInputs: true,
    };
    // Registered only once its settings are accepted: a refused model leaves nothing behind.
    versions.set(version, entry);
    this.models.set(name, versions);
    if (!this.defaults.has(name)) this.defaults.set(name, version);
    this.metrics.modelStatus.set({ model: name }, 0);
    // Threads and processes started while the event loop is pinned would inherit its cores.
    if (!settings.pinCores) this.eventLoop.release();
    let located!: () => void;
    entry.located = new Promise((resolve) => (located = resolve));
    entry.loading = this.load(entry, request, settings, located);
    void entry.loading.then(located);
    // Part of loading: once a model is settled, the event loop is where it belongs.
    entry.loading = entry.loading.then(() => this.placeEventLoop());
    for (const listener of this.registrationListeners) listener(entry);
    if (options.synchronous) {
      await entry.loading;
      if (entry.state === 'FAILED') {
        if (options.keepFailed === false && this.models.get(name)?.get(version) === entry)
          await this.unregister(name, version);
        throw new KilnError(
          KilnErrorCode.ModelLoadFailed,
          entry.error ?? `model ${name} failed to load`,
        );
      }
    }
    return entry;
  }

  /**
   * Keeps a model the operator named at start whose registration failed (a missing folder, an
   * unreadable archive) as FAILED with the reason, so that /ping and readiness say so instead
   * of the model silently missing. Returns undefined when its name cannot be told or is taken.
   */
  recordFailure(url: string, reason: string): ModelEntry | undefined {
    let parsed: ReturnType<typeof parseModelUrl>;
    try {
      parsed = parseModelUrl(url);
    } catch {
      return undefined;
    }
    const name = parsed.name ?? nameOfLocation(parsed.url);
    const version = parsed.version ?? '';
    if (!MODEL_NAME.test(name) || this.models.get(name)?.has(version)) return undefined;
    const entry: ModelEntry = {
      name,
      version,
      url,
      engineName: parsed.engine,
      registeredAt: new Date(),
      state: 'FAILED',
      error: reason,
      loadTimeMs: undefined,
      kind: undefined,
      pool: undefined,
      signature: undefined,
      loading: Promise.resolve(),
      located: Promise.resolve(),
    };
    const versions = this.models.get(name) ?? new Map<string, ModelEntry>();
    versions.set(version, entry);
    this.models.set(name, versions);
    if (!this.defaults.has(name)) this.defaults.set(name, version);
    this.metrics.modelStatus.set({ model: name }, 0);
    for (const listener of this.registrationListeners) listener(entry);
    return entry;
  }

  /**
   * Calls `listener` with each model registered from now on, once its loading has started
   * (`entry.loading` settles when it is READY or FAILED). Returns what stops the calls.
   */
  onRegistered(listener: (entry: ModelEntry) => void): () => void {
    this.registrationListeners.add(listener);
    return () => this.registrationListeners.delete(listener);
  }

  /** The version asked for, or the model's default version. */
  get(name: string, version?: string): ModelEntry {
    const versions = this.models.get(name);
    const entry = versions?.get(version ?? this.defaults.get(name) ?? '');
    if (!entry) {
      throw new KilnError(
        KilnErrorCode.ModelNotFound,
        versions
          ? `model ${name} has no version ${JSON.stringify(version)}`
          : `model ${name} not found`,
      );
    }
    return entry;
  }

  versions(name: string): ModelEntry[] {
    const versions = this.models.get(name);
    if (!versions) throw new KilnError(KilnErrorCode.ModelNotFound, `model ${name} not found`);
    return [...versions.values()];
  }

  list(): ModelEntry[] {
    return [...this.models.values()].flatMap((versions) => [...versions.values()]);
  }

  defaultVersion(name: string): string | undefined {
    return this.defaults.get(name);
  }

  setDefault(name: string, version: string): void {
    this.get(name, version);
    this.defaults.set(name, version);
  }

  describe(name: string, version?: string): ModelDescription[] {
    return version === undefined
      ? this.versions(name).map(describeEntry)
      : [describeEntry(this.get(name, version))];
  }

  /**
   * Queues one request for a model and returns its handle (await `result`, or `cancel()`);
   * throws at once when the model cannot take it.
   */
  submit(
    name: string,
    version: string | undefined,
    input: ServingInput,
    options: JobOptions = {},
  ): JobHandle<ServingOutput> {
    return this.servingPool(name, version).submit(input, options);
  }

  /**
   * The pool that serves a model's requests now; refused as submit would refuse a request
   * (an unknown model, a text-generating one, one not READY), so that a route can answer
   * before it reads the request's body.
   */
  servingPool(name: string, version: string | undefined): WorkerPool<ServingInput, ServingOutput> {
    const entry = this.get(name, version);
    if (entry.kind === 'step')
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `model ${name} generates text: send {"inputs": "...", "parameters": {...}} as JSON, or use /v2/models/${name}/generate or /v1/completions`,
      );
    const pool = readyPool(entry);
    if (isGenerationPool(pool)) throw new KilnError(KilnErrorCode.Internal, 'unreachable');
    return pool;
  }

  /**
   * The pool of a ready text-generation model; a model that is not ready, or does not
   * generate text, is refused with the reason.
   */
  generationPool(name: string, version: string | undefined): GenerationPool {
    const entry = this.get(name, version);
    // Known from its serving.properties at registration: refused even while it loads.
    const notGenerative = () =>
      new KilnError(
        KilnErrorCode.InvalidInput,
        `model ${name} does not generate text (its serving.properties has no option.rolling_batch)`,
      );
    if (entry.kind !== 'step' && entry.state !== 'FAILED') throw notGenerative();
    const pool = readyPool(entry);
    if (!isGenerationPool(pool)) throw notGenerative();
    return pool;
  }

  async scale(
    name: string,
    version: string | undefined,
    limits: { minWorkers?: number; maxWorkers?: number },
    synchronous: boolean,
  ): Promise<void> {
    const entry = this.get(name, version);
    if (entry.state !== 'READY' || !entry.pool) {
      throw new KilnError(
        KilnErrorCode.ModelNotReady,
        `model ${name} is ${entry.state.toLowerCase()}; scale it once it is loaded`,
      );
    }
    const pool: ModelPool = entry.pool;
    this.checkWorkerLimits(limits);
    for (const group of pool.describe().workerGroups) {
      const min = limits.minWorkers ?? group.minWorkers;
      const max = limits.maxWorkers ?? group.maxWorkers;
      if (min > max)
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `min_worker (${min}) must not exceed max_worker (${max})`,
        );
    }
    const scaling = pool.scale(limits);
    if (synchronous) await scaling;
    else scaling.catch(() => undefined);
  }

  /** Unregisters one version (or every version): new requests are refused, accepted ones answered. */
  async unregister(name: string, version?: string): Promise<ModelEntry[]> {
    const targets = version === undefined ? this.versions(name) : [this.get(name, version)];
    const versions = this.models.get(name)!;
    for (const entry of targets) {
      entry.state = 'UNLOADING';
      versions.delete(entry.version);
    }
    if (versions.size === 0) {
      this.models.delete(name);
      this.defaults.delete(name);
      this.metrics.modelStatus.remove({ model: name });
    } else if (!versions.has(this.defaults.get(name) ?? '')) {
      this.defaults.set(name, versions.keys().next().value!);
    }
    await Promise.all(targets.map((entry) => this.stop(entry)));
    this.placeEventLoop();
    return targets;
  }

  /**
   * Stops every model, answering accepted requests first (within the timeout). The models stay
   * registered, UNLOADING, so that a request for one meanwhile is refused as unavailable (503,
   * Retry-After) rather than answered as an unknown model (404).
   */
  async shutdown(timeoutMs: number): Promise<void> {
    const entries = this.list();
    for (const entry of entries) if (entry.state !== 'FAILED') entry.state = 'UNLOADING';
    await Promise.all(entries.map((entry) => this.stop(entry, timeoutMs)));
    // The process may go on (in-process servers, tests): its main thread gets every core back.
    this.eventLoop.release();
  }

  private async stop(entry: ModelEntry, timeoutMs = this.config.shutdownTimeoutMs): Promise<void> {
    await entry.loading;
    if (isGenerationPool(entry.pool)) this.generationMetrics.forget(entry.name, entry.pool);
    await entry.pool?.shutdown({ drain: true, timeoutMs });
  }

  private async load(
    entry: ModelEntry,
    request: RegisterRequest,
    settings: WorkerPoolSettingsInput,
    onLocated: () => void,
  ): Promise<void> {
    const started = performance.now();
    try {
      // The pool locates the model once and runs it as its engine asks (threads or shared);
      // text generation runs on step workers, one rolling batch each.
      const options = {
        name: entry.name,
        model: {
          url: request.url,
          engines: this.engines.modules,
          overrides: { ...this.overrides(request), ...this.pythonLimits(entry.engineName) },
          ...this.sourceOptions(),
        },
        settings,
        onLocated,
      };
      const pool: ModelPool =
        entry.kind === 'step'
          ? await createGenerationPool(options)
          : await createWorkerPool(options);
      if (entry.state === 'UNLOADING') {
        await pool.shutdown({ drain: false });
        return;
      }
      entry.pool = pool;
      entry.kind = pool.kind;
      entry.signature = pool.signature();
      entry.loadTimeMs = performance.now() - started;
      this.logWarmup(entry.name, pool);
      entry.state = 'READY';
      watchPool(this.metrics, entry.name, pool);
      if (isGenerationPool(pool)) this.generationMetrics.watch(entry.name, pool);
      this.metrics.modelLoadSeconds.set({ model: entry.name }, entry.loadTimeMs / 1000);
      this.metrics.modelStatus.set({ model: entry.name }, 1);
    } catch (error) {
      entry.state = 'FAILED';
      entry.error = error instanceof Error ? error.message : String(error);
    }
  }

  /** Says what the first worker's warm-up ran before the model was ready, or why it ran none. */
  private logWarmup(name: string, pool: ModelPool): void {
    const warmup = pool.describe().workerGroups.flatMap((g) => g.workers)[0]?.warmup;
    if (warmup === undefined) return;
    if ('skipped' in warmup) {
      this.log?.info({ model: name, warmup }, `model ${name}: warm-up skipped: ${warmup.skipped}`);
    } else {
      const sizes = warmup.batchSizes.join(', ');
      const leftOut = warmup.leftOut ? `; left out ${warmup.leftOut}` : '';
      this.log?.info(
        { model: name, warmup },
        `model ${name} warmed up at batch sizes ${sizes}${leftOut}`,
      );
    }
  }

  /** Refuses worker counts over the server-wide max_workers_limit. */
  private checkWorkerLimits(settings: object): void {
    const limit = this.config.maxWorkersLimit;
    for (const [key, value] of Object.entries(settings)) {
      if (/workers$/i.test(key) && typeof value === 'number' && value > limit) {
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `${key}=${value} is more than this server's max_workers_limit (${limit})`,
        );
      }
    }
  }

  private overrides(request: RegisterRequest): Record<string, string> {
    const overrides: Record<string, string> = {};
    if (request.engine) overrides.engine = request.engine;
    return overrides;
  }

  /**
   * Server-wide limits and allocator of Python-mode workers, written among the model's
   * properties, where the engine reads them unless the model's own option.* keys say
   * otherwise. No other engine reads them, so other models' properties stay as they are.
   */
  private pythonLimits(engineName: string | undefined): Record<string, string> {
    if (engineName !== PYTHON_ENGINE) return {};
    const { maxResponseSize, maxWorkerRssMb, cpuLauncher } = this.config;
    // cpu_launcher_args' allocator, as TorchServe's launcher: only while the launcher is on.
    const allocator = cpuLauncher.enabled ? cpuLauncher.allocator : 'default';
    return {
      max_response_size: String(maxResponseSize),
      ...(maxWorkerRssMb === undefined ? {} : { max_worker_rss_mb: String(maxWorkerRssMb) }),
      ...(allocator === 'default' ? {} : { allocator }),
    };
  }

  private sourceOptions(): { cacheDir?: string; maxArchiveBytes: number } {
    return {
      maxArchiveBytes: this.config.maxArchiveBytes,
      ...(this.config.modelCacheDir ? { cacheDir: this.config.modelCacheDir } : {}),
    };
  }

  private configDefaults(): WorkerPoolSettingsInput {
    const d = this.config.modelDefaults;
    const processes = this.config.ingressProcesses;
    return {
      // Each ingress process budgets its share of the cores for its models' threads.
      ...(processes > 1
        ? { cores: Math.max(1, Math.floor(os.availableParallelism() / processes)) }
        : {}),
      ...(d.batchSize === undefined ? {} : { batchSize: d.batchSize }),
      maxBatchDelayMs: d.maxBatchDelayMs,
      jobQueueSize: d.jobQueueSize,
      maxIdleTimeS: d.maxIdleTimeS,
      placement: d.placement,
      inlineForwardLimitUs: d.inlineForwardLimitUs,
      workerNice: d.workerNice,
      ...(d.warmupBatchSizes === undefined ? {} : { warmupBatchSizes: d.warmupBatchSizes }),
      ...(d.minWorkers === undefined ? {} : { minWorkers: d.minWorkers }),
      ...(d.maxWorkers === undefined ? {} : { maxWorkers: d.maxWorkers }),
      ...pinningDefaults(this.config.cpuLauncher),
    };
  }

  private requestSettings(request: RegisterRequest): WorkerPoolSettingsInput {
    const settings: { -readonly [K in keyof WorkerPoolSettingsInput]: WorkerPoolSettingsInput[K] } =
      {};
    if (request.batchSize !== undefined) settings.batchSize = request.batchSize;
    if (request.maxBatchDelayMs !== undefined) settings.maxBatchDelayMs = request.maxBatchDelayMs;
    if (request.minWorkers !== undefined) settings.minWorkers = request.minWorkers;
    if (request.maxWorkers !== undefined) settings.maxWorkers = request.maxWorkers;
    if (request.jobQueueSize !== undefined) settings.jobQueueSize = request.jobQueueSize;
    return settings;
  }
}

/** A model's pool, once it is READY; otherwise why it cannot take requests. */
function readyPool(entry: ModelEntry): ModelPool {
  if (entry.state === 'READY' && entry.pool) return entry.pool;
  const why =
    entry.state === 'FAILED'
      ? `failed to load: ${entry.error ?? ''}`
      : entry.state === 'PENDING'
        ? 'is still loading'
        : 'is being unloaded';
  throw new KilnError(
    entry.state === 'FAILED' ? KilnErrorCode.ModelLoadFailed : KilnErrorCode.ModelNotReady,
    `model ${entry.name} ${why}`,
  );
}

/** cpu_launcher_enable and its flags, as every model's pinning unless its properties say. */
function pinningDefaults(launcher: CpuLauncher): WorkerPoolSettingsInput {
  if (!launcher.enabled) return {};
  return {
    pinCores: true,
    pinLogicalCores: launcher.useLogicalCores,
    ...(launcher.nodeId === undefined ? {} : { pinNode: launcher.nodeId }),
    ...(launcher.instances === undefined ? {} : { pinInstances: launcher.instances }),
  };
}

/** What a model may be called: it appears in routes and metric labels. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** The name a model at `url` would get by default: its last segment, less an archive's suffix. */
function nameOfLocation(url: string): string {
  const last =
    url
      .replace(/[/\\]+$/, '')
      .split(/[/\\]/)
      .pop() ?? '';
  return last.replace(/\.(?:zip|tar|tar\.gz|tgz|onnx|pt|pth)$/i, '');
}

/** The file system path of a local model URL (plain path or file://), else undefined. */
function localPath(url: string): string | undefined {
  if (url.startsWith('file://')) {
    try {
      return fileURLToPath(url);
    } catch {
      return undefined;
    }
  }
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? undefined : url;
}
