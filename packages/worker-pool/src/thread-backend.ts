import {
  KilnError,
  KilnErrorCode,
  type PackedOutputs,
  type PredictResult,
  type ServingInput,
  type ServingOutput,
  TransferList,
  type TransferMode,
  servingInputToMessage,
  servingInputViews,
  servingOutputFromMessage,
  unpackServingOutputs,
} from '@kiln/core';
import type { GenerationNews, HandedJob } from './generation-protocol.js';
import { type HostThread, ownHostThread, sharedHostThread } from './inference-threads.js';
import type { BatchRun, GenerationChannel, WorkerBackend } from './worker-backend.js';
import type {
  FromHost,
  ResultMessage,
  ToHost,
  WorkerFacts,
  WorkerInit,
} from './worker-protocol.js';

export interface ThreadBackendOptions {
  readonly init: WorkerInit;
  /** For messages: `OnnxRuntime cpu worker 3`. */
  readonly label: string;
  /** Move input buffers instead of copying them (see WorkerPoolSettings.transferInputs). */
  readonly transferInputs: boolean;
  /** Host on the process's shared thread of this engine instead of a thread of its own. */
  readonly sharedHost: string | undefined;
}

interface PendingRun {
  readonly id: number;
  resolve(run: BatchRun<ServingOutput>): void;
  reject(error: KilnError): void;
}

/**
 * A worker on a host thread: the thread loads the engine and the model and owns the
 * Predictor; batches of ServingInput go in and settled results come back. A thread that
 * exits or throws fails the batch in flight with WORKER_CRASHED.
 */
export class ThreadBackend implements WorkerBackend<ServingInput, ServingOutput> {
  readonly kind = 'thread';
  readonly computesElsewhere = true;
  private host: HostThread | undefined;
  private hostedAs = 0;
  private pending: PendingRun | undefined;
  /** The abort signal a listener of this backend already watches (see listenTo). */
  private listenedSignal: AbortSignal | undefined;
  private nextRunId = 1;
  private starting:
    { resolve(facts: WorkerFacts): void; reject(error: KilnError): void } | undefined;
  private stopping = false;
  private onStopped: (() => void) | undefined;
  private readonly profiles = new Map<number, PendingProfile>();
  private newsListener: ((news: GenerationNews) => void) | undefined;
  private readonly deathListeners: ((error: KilnError) => void)[] = [];

  constructor(private readonly options: ThreadBackendOptions) {}

  start(): Promise<WorkerFacts> {
    const { sharedHost } = this.options;
    const host = sharedHost === undefined ? ownHostThread() : sharedHostThread(sharedHost);
    this.host = host;
    this.hostedAs = host.attach({
      message: (message) => this.onMessage(message),
      lost: (error) => this.failPending(error),
      exit: (error) => this.onExit(error),
    });
    const started = new Promise<WorkerFacts>(
      (resolve, reject) => (this.starting = { resolve, reject }),
    );
    this.post({ type: 'start', worker: this.hostedAs, init: this.options.init });
    return started;
  }

  run(inputs: readonly ServingInput[], signal: AbortSignal): Promise<BatchRun<ServingOutput>> {
    const host = this.host;
    if (!host || this.starting)
      return Promise.reject(
        new KilnError(KilnErrorCode.Internal, `${this.options.label} is not ready`),
      );
    if (this.pending)
      return Promise.reject(
        new KilnError(KilnErrorCode.PredictorBusy, `${this.options.label} already runs a batch`),
      );
    const id = this.nextRunId++;
    this.listenTo(signal);
    return new Promise((resolve, reject) => {
      this.pending = { id, resolve, reject };
      try {
        this.send(host, id, inputs, this.transferMode(inputs.length));
      } catch (error) {
        this.failPending(
          KilnError.wrap(
            error,
            KilnErrorCode.InvalidInput,
            'the batch could not be sent to its worker thread',
          ),
        );
      }
    });
  }

  /**
   * Owned request memory (a server's bodies) moves to the thread; other memory per
   * transferInputs. A batch of several is copied instead: should its thread die, the pool runs
   * its requests again on another one (see PoolWorker), and moved memory would die with it.
   */
  private transferMode(batchSize: number): TransferMode {
    if (batchSize > 1) return 'copy';
    return this.options.transferInputs ? 'move' : 'move-owned';
  }

  /**
   * Aborts the run in flight when `signal` aborts. The pool hands every run the same signal
   * until one is aborted, so one listener serves them all: none is added and removed per run.
   */
  private listenTo(signal: AbortSignal): void {
    if (signal === this.listenedSignal) return;
    this.listenedSignal = signal;
    signal.addEventListener(
      'abort',
      () => {
        // A signal since replaced by another stands for no run of this backend any more.
        const pending = this.pending;
        if (pending && this.listenedSignal === signal)
          this.post({ type: 'abort', worker: this.hostedAs, id: pending.id });
      },
      { once: true },
    );
  }

  /** A step worker's rolling loop on its thread: jobs go in, news of them comes back. */
  readonly generation: GenerationChannel = {
    hand: (jobs: readonly HandedJob[]) =>
      this.post({ type: 'generate', worker: this.hostedAs, jobs }),
    cancel: (ids: readonly number[]) =>
      this.post({ type: 'generate-cancel', worker: this.hostedAs, ids }),
    hold: (id: number, held: boolean) =>
      this.post({ type: 'generate-hold', worker: this.hostedAs, id, held }),
    onNews: (listener: (news: GenerationNews) => void) => {
      this.newsListener = listener;
    },
  };

  /** Ends the engine's per-operator profile on the worker's thread (ONNX Runtime profiling). */
  endProfiling(options: { skipRuns?: number } = {}): Promise<unknown> {
    const id = this.nextRunId++;
    return new Promise((resolve, reject) => {
      this.profiles.set(id, { resolve, reject });
      this.post({
        type: 'end-profiling',
        worker: this.hostedAs,
        id,
        skipRuns: options.skipRuns,
      });
    });
  }

  /** Posts a batch; memory that refuses to move (an engine's external buffer) is copied instead. */
  private send(
    host: HostThread,
    id: number,
    inputs: readonly ServingInput[],
    mode: TransferMode,
  ): void {
    // The copies of a batch share one buffer: one transfer, however many requests.
    const reserveBytes = TransferList.bytesToCopy(mode, inputs.flatMap(viewsOf));
    const transfer = new TransferList(mode, { reserveBytes });
    const message: ToHost = {
      type: 'run',
      worker: this.hostedAs,
      id,
      inputs: inputs.map((input) => servingInputToMessage(input, transfer)),
    };
    try {
      host.post(message, transfer.transfer);
    } catch (error) {
      if (mode === 'copy') throw error;
      this.send(host, id, inputs, 'copy');
    }
  }

  onDeath(listener: (error: KilnError) => void): void {
    this.deathListeners.push(listener);
  }

  async stop(): Promise<void> {
    const host = this.host;
    if (!host) return;
    this.stopping = true;
    const stopped = new Promise<void>((resolve) => (this.onStopped = resolve));
    this.post({ type: 'stop', worker: this.hostedAs });
    await Promise.race([stopped, host.exited]);
    // Released and done: a thread of its own ends even if an engine handle would keep it alive.
    await this.release(host);
  }

  async terminate(): Promise<void> {
    const host = this.host;
    if (!host) return;
    this.stopping = true;
    if (host.shared) {
      // A shared host serves other workers too: this worker only leaves it.
      this.post({ type: 'stop', worker: this.hostedAs });
      await this.release(host);
      this.onExit(new KilnError(KilnErrorCode.Closed, `${this.options.label} was stopped`));
    } else {
      // Its exit fails what waits, as for any thread that ends.
      await host.terminate();
      await this.release(host);
    }
  }

  private async release(host: HostThread): Promise<void> {
    this.host = undefined;
    await host.detach(this.hostedAs);
  }

  private post(message: ToHost): void {
    try {
      this.host?.post(message);
    } catch {
      // The thread is gone; its exit settles what waits on it.
    }
  }

  private onMessage(message: FromHost): void {
    switch (message.type) {
      case 'ready':
        this.starting?.resolve(message.facts);
        this.starting = undefined;
        return;
      case 'start-failed':
        this.starting?.reject(KilnError.fromJSON(message.error));
        this.starting = undefined;
        return;
      case 'results': {
        const pending = this.takePending(message.id);
        const results = message.packed
          ? decodePacked(message.packed)
          : message.results.map(decodeResult);
        pending?.resolve({ results, timings: message.timings });
        return;
      }
      case 'run-failed': {
        const cause = KilnError.fromJSON(message.error);
        this.takePending(message.id)?.reject(
          new KilnError(
            KilnErrorCode.WorkerCrashed,
            `${this.options.label} failed: ${cause.message}`,
            {
              cause,
              ...(cause.details ? { details: cause.details } : {}),
            },
          ),
        );
        return;
      }
      case 'generated':
        this.newsListener?.(message);
        return;
      case 'lost':
        // The thread lives on, but its worker cannot: it goes as if its thread had ended.
        this.onExit(KilnError.fromJSON(message.error));
        return;
      case 'profile': {
        const profile = this.profiles.get(message.id);
        this.profiles.delete(message.id);
        if (message.result.ok) profile?.resolve(message.result.value);
        else profile?.reject(KilnError.fromJSON(message.result.error));
        return;
      }
      case 'stopped':
        this.onStopped?.();
        return;
    }
  }

  private takePending(id: number): PendingRun | undefined {
    const pending = this.pending;
    if (pending?.id !== id) return undefined;
    this.pending = undefined;
    return pending;
  }

  private failPending(error: KilnError): void {
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(error);
    for (const waiting of this.profiles.values()) waiting.reject(error);
    this.profiles.clear();
  }

  /** The host thread ended (or this worker was terminated): fail what waits, report death. */
  private onExit(cause: KilnError): void {
    if (this.host && !this.stopping) void this.release(this.host);
    const error = this.stopping
      ? new KilnError(KilnErrorCode.Closed, `${this.options.label} was stopped`)
      : new KilnError(
          KilnErrorCode.WorkerCrashed,
          `${this.options.label} crashed: ${cause.message}`,
          {
            ...(cause.details ? { details: cause.details } : {}),
          },
        );
    if (this.starting) {
      this.starting.reject(error);
      this.starting = undefined;
    }
    this.failPending(error);
    if (!this.stopping) for (const listener of this.deathListeners.splice(0)) listener(error);
  }
}

interface PendingProfile {
  resolve(value: unknown): void;
  reject(error: KilnError): void;
}

function viewsOf(input: ServingInput) {
  return [...servingInputViews(input)];
}

/** A batch's packed answers; all fail alike when they cannot be read. */
function decodePacked(packed: PackedOutputs): PredictResult<ServingOutput>[] {
  try {
    return unpackServingOutputs(packed).map((value) => ({ ok: true, value }));
  } catch (error) {
    const failure = KilnError.wrap(error, KilnErrorCode.Internal, 'worker sent malformed results');
    return Array.from({ length: packed.answers }, () => ({ ok: false, error: failure }));
  }
}

function decodeResult(message: ResultMessage): PredictResult<ServingOutput> {
  if (!message.ok) return { ok: false, error: KilnError.fromJSON(message.error) };
  try {
    return { ok: true, value: servingOutputFromMessage(message.value) };
  } catch (error) {
    return {
      ok: false,
      error: KilnError.wrap(error, KilnErrorCode.Internal, 'worker sent a malformed result'),
    };
  }
}
