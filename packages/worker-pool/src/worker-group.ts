import type { KilnError } from '@kiln/core';
import { type Device, formatDevice } from '@kiln/core';
import type { PoolWorker, WorkerState } from './pool-worker.js';
import type { WorkerLimits } from './settings.js';

/** What a group needs from its pool. */
export interface WorkerGroupContext<I, O> {
  /** Builds (does not start) a worker for a slot of this group. */
  createWorker(group: WorkerGroup<I, O>, slot: number): PoolWorker<I, O>;
  /** Whether scaling may start workers now: not shutting down, not backing off after failures. */
  mayStart(): boolean;
  /** Jobs accepted and not yet handed to a worker. */
  queueDepth(): number;
  /** The batch size workers take now (it may change: adaptive batching). */
  batchSize(): number;
  /** Whether workers batch adaptively: each takes whatever waits, up to batchSize(). */
  adaptiveBatching(): boolean;
  /** A worker of this group could not start. */
  startFailed(group: WorkerGroup<I, O>, error: KilnError): void;
}

/**
 * A batch that runs at least this long leaves requests waiting long enough for another worker
 * (on cores the running ones leave idle) to pay for its start.
 */
export const SLOW_BATCH_MS = 5;

/**
 * The workers of one model on one device, between `minWorkers` and `maxWorkers`: DJL's
 * scaling rule adds a worker while the queue holds more than 2 × batch_size jobs, workers
 * above the minimum leave after max_idle_time, and a crashed worker is replaced.
 */
export class WorkerGroup<I, O> {
  readonly workers = new Set<PoolWorker<I, O>>();
  /** The last reason a worker of this group failed, for describe(). */
  lastError: KilnError | undefined;
  /** How long this group's batches ran lately (ms, smoothed over about the last 8). */
  private recentRunMs = 0;

  constructor(
    readonly device: Device,
    private currentLimits: WorkerLimits,
    private readonly context: WorkerGroupContext<I, O>,
  ) {}

  get name(): string {
    return formatDevice(this.device);
  }

  get limits(): WorkerLimits {
    return this.currentLimits;
  }

  /** Workers that count as capacity: starting or serving, not leaving. */
  get capacity(): number {
    let n = 0;
    for (const worker of this.workers) if (!worker.leaving) n++;
    return n;
  }

  countIn(state: WorkerState): number {
    let n = 0;
    for (const worker of this.workers) if (worker.state === state) n++;
    return n;
  }

  /** Starts workers up to `minWorkers`; rejects with the first start failure. */
  async fill(): Promise<void> {
    const missing = this.currentLimits.minWorkers - this.capacity;
    const starts = Array.from({ length: Math.max(0, missing) }, () => this.spawn());
    const results = await Promise.allSettled(starts);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Applies DJL's scaling rule; called whenever a job is accepted. */
  autoscale(): void {
    if (!this.context.mayStart()) return;
    const { minWorkers, maxWorkers } = this.currentLimits;
    const capacity = this.capacity;
    if (capacity >= maxWorkers) return;
    const depth = this.context.queueDepth();
    const starting = this.countIn('starting');
    const fromZero = capacity === 0 && depth > 0;
    const belowMin = capacity < minWorkers && starting === 0;
    // One start at a time: a loading worker eats the cores the running ones need.
    const backlog = starting === 0 && depth > 2 * this.context.batchSize();
    if (fromZero || belowMin || backlog || (starting === 0 && this.waitsBehindSlowBatches(depth)))
      this.start();
  }

  /** A batch of this group took `runMs` on its worker. */
  noteRun(runMs: number): void {
    this.recentRunMs += (runMs - this.recentRunMs) / 8;
  }

  /**
   * With adaptive batching a worker takes everything waiting, so the queue never holds
   * 2 × batch_size jobs and DJL's rule would never add a worker, though the busy ones leave
   * cores idle (each has cores ÷ maxWorkers threads). Requests waiting behind batches that
   * all run long are the backlog then. Models whose batches are quick stay at one worker:
   * there the main thread's request handling is the bound, and another worker competes with it.
   */
  private waitsBehindSlowBatches(depth: number): boolean {
    return (
      this.context.adaptiveBatching() &&
      depth >= 2 &&
      this.recentRunMs >= SLOW_BATCH_MS &&
      this.countIn('busy') >= this.capacity
    );
  }

  /** New limits: starts up to the minimum, stops workers above the maximum (idle ones first). */
  async setLimits(limits: WorkerLimits): Promise<void> {
    this.currentLimits = limits;
    const excess = this.capacity - limits.maxWorkers;
    if (excess > 0) {
      const order: WorkerState[] = ['idle', 'starting', 'busy'];
      const candidates = [...this.workers]
        .filter((w) => !w.leaving)
        .sort((a, b) => order.indexOf(a.state) - order.indexOf(b.state) || b.id - a.id);
      for (const worker of candidates.slice(0, excess)) worker.stop();
    }
    await this.fill();
  }

  /** An idle worker past max_idle_time may leave while the group stays at its minimum. */
  mayRetire(worker: PoolWorker<I, O>): boolean {
    return !worker.leaving && this.capacity > this.currentLimits.minWorkers;
  }

  /** Starts one worker whatever the limits say: used to drain the queue on shutdown. */
  startForDrain(): void {
    if (this.capacity === 0) this.start();
  }

  /** A worker of this group is gone: replace it where the rules ask for it. */
  onExited(worker: PoolWorker<I, O>, error: KilnError | undefined, phase: 'start' | 'run'): void {
    this.workers.delete(worker);
    if (error) this.lastError = error;
    if (phase === 'start' && error) {
      this.context.startFailed(this, error);
      return;
    }
    if (!this.context.mayStart()) return;
    const { minWorkers, maxWorkers } = this.currentLimits;
    const crashed = error !== undefined;
    const stranded = this.capacity === 0 && this.context.queueDepth() > 0;
    if (this.capacity < maxWorkers && (crashed || stranded || this.capacity < minWorkers))
      this.start();
  }

  stopAll(): void {
    for (const worker of this.workers) worker.stop();
  }

  async terminateAll(): Promise<void> {
    await Promise.all([...this.workers].map((w) => w.terminate()));
  }

  /** Resolves once every worker of the group has exited. */
  async exited(): Promise<void> {
    while (this.workers.size > 0) await Promise.all([...this.workers].map((w) => w.exited));
  }

  private start(): void {
    this.spawn().catch(() => {
      // Reported through onExited → startFailed; nothing waits on this start.
    });
  }

  private spawn(): Promise<void> {
    const worker = this.context.createWorker(this, this.freeSlot());
    this.workers.add(worker);
    return worker.start();
  }

  private freeSlot(): number {
    const used = new Set([...this.workers].map((w) => w.slot));
    let slot = 0;
    while (used.has(slot)) slot++;
    return slot;
  }
}
