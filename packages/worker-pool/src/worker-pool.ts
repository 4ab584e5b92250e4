import type { ModelSignature } from './worker-protocol.js';
import { hasBatchAxis } from './batch-axis.js';
import {
  type BucketKey,
  type Clock,
  type JobHandle,
  type JobOptions,
  JobQueue,
  systemClock,
} from '@kiln/batching';
import { type Device, KilnError, KilnErrorCode, type WorkerKind } from '@kiln/core';
import { PoolEvents, type WorkerPoolEvent, type WorkerPoolListener } from './pool-events.js';
import { type CorePlan, planCores, processCores, readCpuTopology } from './cpu-topology.js';
import type { ForwardProbe } from './forward-probe.js';
import type {
  PlacementReport,
  PoolDescription,
  PoolStats,
  PoolStatus,
  PoolTotals,
  WorkerDescription,
} from './pool-description.js';
import { PoolWorker, type BatchReport, type WorkerState } from './pool-worker.js';
import { type WorkerLimits, type WorkerPoolSettings, workerLimitsFor } from './settings.js';
import {
  type ThreadPlanRequest,
  applyOmpBudget,
  planThreads,
  userOmpThreads,
} from './thread-budget.js';
import type { WorkerBackend } from './worker-backend.js';
import { WorkerGroup, type WorkerGroupContext } from './worker-group.js';

/** Per-request options of submit/predict. */
export type SubmitOptions = JobOptions;

export interface ShutdownOptions {
  /** Answer every accepted job before stopping (default); false fails queued jobs with CLOSED. */
  readonly drain?: boolean;
  /** After this long (ms) workers are terminated and what is left fails with CLOSED. Default 30 s. */
  readonly timeoutMs?: number;
}

export interface ScaleOptions {
  readonly minWorkers?: number;
  readonly maxWorkers?: number;
  /** Only this device's group (`cpu`, `gpu0`); every group when left out. */
  readonly device?: string;
}

/** How the pool makes a worker's backend; the pool owns the rest. */
export interface BackendFactory<I, O> {
  create(request: {
    device: Device;
    slot: number;
    label: string;
    threads: Omit<ThreadPlanRequest, 'engineOptions'>;
    /** Cores to pin the worker to (`pinCores`, CPU groups); its thread budget is their count. */
    cores: readonly number[] | undefined;
  }): WorkerBackend<I, O>;
}

/** What a WorkerPool is built from (createWorkerPool fills it). */
export interface WorkerPoolInit<I, O> {
  readonly name: string;
  /** What its workers run (see WorkerKind); default `forward`. */
  readonly kind?: WorkerKind | undefined;
  readonly settings: WorkerPoolSettings;
  /** One worker group per device. */
  readonly devices: readonly Device[];
  readonly backends: BackendFactory<I, O>;
  readonly clock?: Clock | undefined;
  /** Sequence bucketing: only jobs of one bucket share a batch (see @kiln/batching). */
  readonly bucketOf?: ((input: I) => BucketKey | undefined) | undefined;
  /** Called once the pool has shut down (a model the pool loaded itself is disposed). */
  readonly release?: (() => Promise<void>) | undefined;
  /** Where its workers run and why, for describe(). */
  readonly placement: PlacementReport;
  /**
   * A blocking engine's model placed on the calling thread: more workers would run one after
   * another on that thread, each with its own copy, so scale() refuses more than one.
   */
  readonly oneWorker?: boolean | undefined;
}

export { hasBatchAxis };

const INITIAL_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 30_000;
const DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000;

/**
 * Workers for one model: one group per device pulling from one bounded job queue. The main
 * thread only routes; workers run the batches. Every accepted job is answered — with its
 * output, its own error, its worker's crash, TIMEOUT, CANCELLED or CLOSED — and never hangs.
 */
export class WorkerPool<I, O> {
  private readonly queue: JobQueue<I, O>;
  private readonly groups: WorkerGroup<I, O>[];
  private readonly events = new PoolEvents();
  private readonly totals: PoolTotals = {
    accepted: 0,
    succeeded: 0,
    failed: 0,
    rejected: 0,
    expired: 0,
    cancelled: 0,
    batches: 0,
    crashes: 0,
    startFailures: 0,
  };
  private nextWorkerId = 1;
  private closing: Promise<void> | undefined;
  /** Set when no worker could start; submissions fail fast until `retryAt`. */
  private failure: { error: KilnError; retryAt: number } | undefined;
  private backoffMs = INITIAL_BACKOFF_MS;
  private knownSignature: ModelSignature | undefined;
  /** Read by every worker before each batch: adaptive batching changes it once. */
  private readonly batching: { batchSize: number; maxBatchDelayMs: number };
  private autoBatchingDecided = false;
  private adaptiveBatching = false;

  readonly name: string;
  /** What its workers run: batches of tensors, whole requests, or decoding steps. */
  readonly kind: WorkerKind;
  readonly settings: WorkerPoolSettings;
  private readonly backends: BackendFactory<I, O>;
  private readonly clock: Clock;
  private readonly release: (() => Promise<void>) | undefined;
  private placement: PlacementReport;
  private readonly oneWorker: boolean;

  constructor(options: WorkerPoolInit<I, O>) {
    const { settings, clock = systemClock } = options;
    this.name = options.name;
    this.kind = options.kind ?? 'forward';
    this.settings = settings;
    this.backends = options.backends;
    this.clock = clock;
    this.release = options.release;
    this.placement = options.placement;
    this.oneWorker = options.oneWorker ?? false;
    this.batching = { batchSize: settings.batchSize, maxBatchDelayMs: settings.maxBatchDelayMs };
    this.queue = new JobQueue<I, O>({
      capacity: settings.jobQueueSize,
      clock,
      ...(settings.predictTimeoutMs === undefined
        ? {}
        : { defaultTimeoutMs: settings.predictTimeoutMs }),
      ...(options.bucketOf ? { bucketOf: options.bucketOf } : {}),
    });
    const devices = options.devices;
    const context: WorkerGroupContext<I, O> = {
      createWorker: (group, slot) => this.createWorker(group, slot),
      mayStart: () => this.mayStart(),
      queueDepth: () => this.queue.depth,
      batchSize: () => this.batching.batchSize,
      adaptiveBatching: () => this.adaptiveBatching,
      startFailed: (_group, error) => this.onStartFailed(error),
    };
    this.groups = devices.map(
      (device) => new WorkerGroup(device, workerLimitsFor(settings, device.type), context),
    );
    this.queue.on('enqueued', () => {
      this.totals.accepted++;
      for (const group of this.groups) group.autoscale();
    });
    this.queue.on('rejected', (job, error) => this.dropped('rejected', job.id, error));
    this.queue.on('expired', (job, error) => this.dropped('expired', job.id, error));
    this.queue.on('cancelled', (job, error) => this.dropped('cancelled', job.id, error));
  }

  /** Starts every group's minimum of workers; rejects (after stopping) if one cannot start. */
  async start(): Promise<void> {
    try {
      // A node that does not exist, or no core to pin to, fails the start with the reason.
      this.corePlan();
      await Promise.all(this.groups.map((g) => g.fill()));
    } catch (error) {
      await this.shutdown({ drain: false });
      throw error;
    }
  }

  /**
   * Queues a request and returns at once (Infery's `predict_async`): await `result`, or
   * `cancel()` it. A full queue fails `result` at once with QUEUE_FULL.
   */
  submit(input: I, options: SubmitOptions = {}): JobHandle<O> {
    const refusal = this.refusal() ?? this.inputProblem(input);
    if (refusal) {
      this.dropped('rejected', 0, refusal);
      return refusedHandle(refusal);
    }
    return this.queue.submit(input, options);
  }

  /** `submit(input).result`. */
  predict(input: I, options?: SubmitOptions): Promise<O> {
    return this.submit(input, options).result;
  }

  /** Changes worker limits (DJL's `PUT /models/{m}?min_worker=&max_worker=`); resolves once the minimum runs. */
  async scale(options: ScaleOptions): Promise<void> {
    if (this.closing)
      throw new KilnError(KilnErrorCode.Closed, `model ${this.name} is shutting down`);
    const groups = this.groups.filter(
      (g) => options.device === undefined || g.name === options.device,
    );
    if (groups.length === 0) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `model ${this.name} has no workers on ${options.device} (devices: ${this.groups.map((g) => g.name).join(', ')})`,
      );
    }
    if (this.oneWorker && (options.maxWorkers ?? 1) > 1) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `model ${this.name} runs inline on the calling thread (${this.placement.reason}), with one worker; load it with placement=thread to run more`,
      );
    }
    const limits = groups.map((g) =>
      checkedLimits({
        minWorkers: options.minWorkers ?? g.limits.minWorkers,
        maxWorkers: options.maxWorkers ?? g.limits.maxWorkers,
      }),
    );
    // Asking again is a retry: a model that failed to start may start now.
    this.failure = undefined;
    this.backoffMs = INITIAL_BACKOFF_MS;
    await Promise.all(groups.map((g, i) => g.setLimits(limits[i]!)));
    for (const group of groups) group.autoscale();
  }

  /**
   * The model's inputs and outputs as the first ready worker's engine reported them; kept
   * when workers come and go. Undefined until a worker has started.
   */
  signature(): ModelSignature | undefined {
    if (!this.knownSignature) {
      for (const group of this.groups) {
        for (const worker of group.workers) this.knownSignature ??= worker.facts?.signature;
      }
    }
    return this.knownSignature;
  }

  /** The forward probe of the first worker that ran one (placement auto). */
  forwardProbe(): ForwardProbe | undefined {
    for (const group of this.groups) {
      for (const worker of group.workers)
        if (worker.facts?.forwardProbe) return worker.facts.forwardProbe;
    }
    return undefined;
  }

  /** Records where the workers run once createWorkerPool has decided (placement auto). */
  notePlacement(placement: PlacementReport): void {
    this.placement = placement;
  }

  describe(): PoolDescription {
    return {
      name: this.name,
      batchSize: this.batching.batchSize,
      maxBatchDelayMs: this.batching.maxBatchDelayMs,
      maxIdleTimeS: this.settings.maxIdleTimeS,
      queueSize: this.queue.capacity,
      queued: this.queue.depth,
      status: this.status(),
      placement: this.placement,
      workerGroups: this.groups.map((group) => ({
        device: group.name,
        minWorkers: group.limits.minWorkers,
        maxWorkers: group.limits.maxWorkers,
        workers: [...group.workers].map(describeWorker),
        lastError: group.lastError?.message,
      })),
    };
  }

  stats(): PoolStats {
    const workers: Record<WorkerState, number> = {
      starting: 0,
      idle: 0,
      busy: 0,
      stopping: 0,
      stopped: 0,
      failed: 0,
    };
    for (const group of this.groups) for (const worker of group.workers) workers[worker.state]++;
    return {
      queueDepth: this.queue.depth,
      queueCapacity: this.queue.capacity,
      workers,
      totals: { ...this.totals },
    };
  }

  on<E extends WorkerPoolEvent>(event: E, listener: WorkerPoolListener<E>): this {
    this.events.on(event, listener);
    return this;
  }

  off<E extends WorkerPoolEvent>(event: E, listener: WorkerPoolListener<E>): this {
    this.events.off(event, listener);
    return this;
  }

  /**
   * Stops the pool: new requests fail with CLOSED; with `drain` (default) every accepted job
   * is answered first. Unloading a model is this. Idempotent.
   */
  shutdown(options: ShutdownOptions = {}): Promise<void> {
    this.closing ??= this.close(
      options.drain ?? true,
      options.timeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS,
    );
    return this.closing;
  }

  private async close(drain: boolean, timeoutMs: number): Promise<void> {
    const closed = new KilnError(KilnErrorCode.Closed, `model ${this.name} is shutting down`);
    this.queue.close(closed);
    if (!drain) this.queue.failAll(closed);
    if (this.queue.depth > 0 && this.capacity() === 0) this.groups[0]?.startForDrain();
    // Idle workers see the closed queue and leave; busy ones leave once it is empty.
    const exited = Promise.all(this.groups.map((g) => g.exited()));
    let timer: unknown;
    const late = await Promise.race([
      exited.then(() => false),
      new Promise<boolean>(
        (resolve) => (timer = this.clock.setTimeout(() => resolve(true), timeoutMs)),
      ),
    ]);
    this.clock.clearTimeout(timer);
    if (late) {
      this.queue.failAll(closed);
      await Promise.all(this.groups.map((g) => g.terminateAll()));
      await exited;
    }
    await this.release?.().catch(() => undefined);
  }

  /**
   * Ends the per-operator profile of every serving worker (models loaded with
   * option.profiling=true on ONNX Runtime) and returns each worker's tables, leaving out the
   * first `skipRuns` runs. Runs on the worker's own thread, after its batch in flight.
   */
  async endProfiling(options: { skipRuns?: number } = {}): Promise<unknown[]> {
    const workers = this.groups.flatMap((g) =>
      [...g.workers].filter((w) => w.state === 'idle' || w.state === 'busy'),
    );
    if (workers.length === 0)
      throw new KilnError(KilnErrorCode.ModelNotReady, `model ${this.name} has no running worker`);
    return Promise.all(workers.map((w) => w.endProfiling(options)));
  }

  private createWorker(group: WorkerGroup<I, O>, slot: number): PoolWorker<I, O> {
    const id = this.nextWorkerId++;
    const label = `${this.name} ${group.name} worker ${id}`;
    const threads = this.threadRequest();
    const plan = group.device.type === 'cpu' ? this.corePlan() : undefined;
    const cores = plan ? plan.sets[slot % plan.sets.length] : undefined;
    const backend = this.backends.create({
      device: group.device,
      slot,
      label,
      // A pinned worker's budget is its own cores.
      threads: cores ? { ...threads, cores: cores.length, cpuWorkers: 1 } : threads,
      cores,
    });
    return this.newWorker(
      id,
      slot,
      label,
      backend,
      this.queue,
      this.clock,
      {
        batching: this.batching,
        maxIdleTimeMs: this.settings.maxIdleTimeS * 1000,
        startTimeoutMs: this.settings.startTimeoutMs,
        hungRunTimeoutMs: this.settings.hungRunTimeoutMs,
      },
      {
        mayRetire: (worker) => group.mayRetire(worker),
        mustDrain: () => this.queue.depth > 0 && this.capacity() === 0,
        stateChanged: (worker, previous) => this.onStateChanged(group, worker, previous),
        batchDone: (report) => this.onBatchDone(group, report),
        timedOut: (job) => this.dropped('expired', job.id, undefined),
        exited: (worker, error, phase) => {
          if (error && phase === 'run') this.totals.crashes++;
          if (error && phase === 'start') this.totals.startFailures++;
          group.onExited(worker, error, phase);
        },
      },
    );
  }

  /** Builds a worker; pools whose workers run something else than batches make their own. */
  protected newWorker(...parts: ConstructorParameters<typeof PoolWorker<I, O>>): PoolWorker<I, O> {
    return new PoolWorker(...parts);
  }

  /** Why an input is refused at submit, before it is queued (none here). */
  protected inputProblem(input: I): KilnError | undefined {
    void input;
    return undefined;
  }

  /** Every worker of every group. */
  protected allWorkers(): PoolWorker<I, O>[] {
    return this.groups.flatMap((g) => [...g.workers]);
  }

  /**
   * With `pinCores`, the cores of each CPU worker slot: the machine's physical cores (logical
   * ones with `pinLogicalCores`, one node's with `pinNode`) that this process may use, split
   * evenly between `pinInstances` or the CPU groups' maxWorkers. Undefined when not pinning.
   */
  corePlan(): CorePlan | undefined {
    if (!this.settings.pinCores || process.platform !== 'linux') return undefined;
    const workers = this.groups
      .filter((g) => g.device.type === 'cpu')
      .reduce((sum, g) => sum + g.limits.maxWorkers, 0);
    return planCores(readCpuTopology(), {
      workers: this.settings.pinInstances ?? Math.max(1, workers),
      logicalCores: this.settings.pinLogicalCores,
      node: this.settings.pinNode,
      allowed: processCores(),
    });
  }

  /**
   * With `pinCores`, every core its CPU workers may be pinned to (the sets of the slots up to
   * maxWorkers); undefined when not pinning.
   */
  reservedCores(): number[] | undefined {
    const plan = this.corePlan();
    if (!plan) return undefined;
    const slots = this.groups
      .filter((g) => g.device.type === 'cpu')
      .reduce((sum, g) => sum + g.limits.maxWorkers, 0);
    const sets = plan.sets.slice(0, Math.max(1, Math.min(plan.sets.length, slots)));
    return [...new Set(sets.flat())].sort((a, b) => a - b);
  }

  /** The pool's side of the thread budget: every group's maximum shares the cores. */
  private threadRequest(): Omit<ThreadPlanRequest, 'engineOptions'> {
    const workers = this.groups.reduce((sum, g) => sum + g.limits.maxWorkers, 0);
    const request = {
      cores: this.settings.cores,
      cpuWorkers: workers,
      threads: this.settings.threads,
      userOmpThreads: userOmpThreads(),
    };
    applyOmpBudget(planThreads(request).ompThreads);
    return request;
  }

  private capacity(): number {
    return this.groups.reduce((sum, g) => sum + g.capacity, 0);
  }

  private mayStart(): boolean {
    if (this.closing) return false;
    return !this.failure || this.clock.now() >= this.failure.retryAt;
  }

  /** Why a request is refused before it is queued, if it is. */
  private refusal(): KilnError | undefined {
    if (this.closing) return undefined; // the closed queue answers CLOSED itself
    if (this.groups.every((g) => g.limits.maxWorkers === 0)) {
      return new KilnError(
        KilnErrorCode.ModelNotReady,
        `model ${this.name} has no workers (maxWorkers is 0); scale it up first`,
      );
    }
    if (this.failure && this.capacity() === 0 && this.clock.now() < this.failure.retryAt)
      return this.failure.error;
    return undefined;
  }

  /** No worker of any group runs: fail what waits, and back off before trying again. */
  private onStartFailed(error: KilnError): void {
    if (this.capacity() > 0) return;
    const failure = new KilnError(
      error.code,
      `no worker of model ${this.name} could start: ${error.message}`,
      {
        cause: error,
        ...(error.details ? { details: error.details } : {}),
      },
    );
    this.failure = { error: failure, retryAt: this.clock.now() + this.backoffMs };
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
    this.queue.failAll(failure);
  }

  private onStateChanged(
    group: WorkerGroup<I, O>,
    worker: PoolWorker<I, O>,
    previous: WorkerState,
  ): void {
    if (previous === 'starting' && worker.state === 'idle') {
      this.failure = undefined;
      this.backoffMs = INITIAL_BACKOFF_MS;
      this.decideAutoBatching(worker);
      // The queue may have grown while it loaded: the scaling rule holds, not just on arrival.
      // Checked once the new worker has taken its first batch.
      queueMicrotask(() => group.autoscale());
    }
    this.events.emit('worker', {
      device: group.name,
      workerId: worker.id,
      state: worker.state,
      previous,
      error: worker.error,
    });
  }

  /**
   * Adaptive batching (settings.autoBatchSize), decided once, when the first worker reports
   * the model's inputs: on when every input has a batch axis.
   */
  private decideAutoBatching(worker: PoolWorker<I, O>): void {
    const size = this.settings.autoBatchSize;
    const signature = worker.facts?.signature;
    if (size === undefined || this.autoBatchingDecided || !signature) return;
    this.autoBatchingDecided = true;
    if (hasBatchAxis(signature.inputs)) {
      this.batching.batchSize = size;
      this.batching.maxBatchDelayMs = 0;
      this.adaptiveBatching = true;
    }
  }

  private onBatchDone(group: WorkerGroup<I, O>, report: BatchReport<I, O>): void {
    // The worker's own time for the batch where it reports one: runMs also counts the time
    // the answer waits for this thread, which a busy main thread stretches.
    const timings = report.run?.timings;
    group.noteRun(
      timings ? timings.preprocessMs + timings.inferenceMs + timings.postprocessMs : report.runMs,
    );
    const batch = {
      device: group.name,
      workerId: report.worker.id,
      batchSize: report.jobs.length,
      forwards: timings?.forwards ?? 0,
      preprocessMs: timings?.preprocessMs ?? 0,
      inferenceMs: timings?.inferenceMs ?? 0,
      postprocessMs: timings?.postprocessMs ?? 0,
      runMs: report.runMs,
      ok: report.error === undefined,
    };
    this.totals.batches++;
    this.events.emit('batch', batch);
    report.jobs.forEach(({ job, queueMs, answered, retried }, i) => {
      // Back in the queue: counted, and its wait measured, once a later run answers it.
      if (retried) return;
      const result = report.run?.results[i];
      const ok = result?.ok ?? false;
      const code =
        result === undefined ? report.error?.code : result.ok ? undefined : result.error.code;
      // A job that timed out or was cancelled while running is counted there already.
      if (answered) this.totals[ok ? 'succeeded' : 'failed']++;
      this.events.emit('job', {
        jobId: job.id,
        device: batch.device,
        workerId: batch.workerId,
        queueMs,
        batchSize: batch.batchSize,
        preprocessMs: batch.preprocessMs,
        inferenceMs: batch.inferenceMs,
        postprocessMs: batch.postprocessMs,
        ok,
        answered,
        code,
      });
    });
  }

  private dropped(
    event: 'rejected' | 'expired' | 'cancelled',
    jobId: number,
    error: KilnError | undefined,
  ): void {
    this.totals[event]++;
    this.events.emit(event, { jobId, error });
  }

  /** The pool's health as `/ping` reports it; cheap enough to ask on every health check. */
  status(): PoolStatus {
    if (this.closing || this.groups.every((g) => g.limits.maxWorkers === 0)) return 'Unhealthy';
    const serving = this.groups.some((g) => g.countIn('idle') + g.countIn('busy') > 0);
    if (serving) return 'Healthy';
    if (this.failure) return 'FAILED';
    if (this.groups.some((g) => g.countIn('starting') > 0)) return 'PENDING';
    // Scaled to zero: a request starts a worker.
    return 'Healthy';
  }
}

function describeWorker<I, O>(worker: PoolWorker<I, O>): WorkerDescription {
  const pinning = worker.facts?.pinning;
  const priority = worker.facts?.priority;
  return {
    id: worker.id,
    startTime: worker.startedAt.toISOString(),
    status: worker.state,
    kind: worker.kind,
    threadId: worker.facts?.threadId,
    intraOpThreads: worker.facts?.intraOpThreads,
    pinnedCores: pinning?.pinned ? pinning.cores : undefined,
    pinError: pinning && !pinning.pinned ? pinning.reason : undefined,
    nice: priority?.lowered ? priority.nice : undefined,
    niceError: priority && !priority.lowered ? priority.reason : undefined,
    model: worker.facts?.model,
    warmup: worker.facts?.warmup,
  };
}

function checkedLimits(limits: WorkerLimits): WorkerLimits {
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${key} must be an integer ≥ 0 (got ${String(value)})`,
      );
    }
  }
  if (limits.minWorkers > limits.maxWorkers) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `minWorkers (${limits.minWorkers}) must not exceed maxWorkers (${limits.maxWorkers})`,
    );
  }
  return limits;
}

/** The handle of a request refused before it was queued. */
function refusedHandle<O>(error: KilnError): JobHandle<O> {
  return { id: 0, result: Promise.reject(error), cancel: () => undefined };
}
