import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import {
  KilnError,
  KilnErrorCode,
  type PredictResult,
  type ServingInput,
  type ServingOutput,
  TransferList,
  type TransferMode,
  servingInputToMessage,
  servingOutputFromMessage,
  spawnModuleWorker,
} from '@kiln/core';
import type { BatchRun, WorkerBackend } from './worker-backend.js';
import type {
  FromWorker,
  ResultMessage,
  ThreadWorkerInit,
  ToWorker,
  WorkerFacts,
} from './worker-protocol.js';

// The worker's entry sits beside this file, as .ts from source and as .js once built.
const ENTRY = new URL(
  `./thread-worker-main${path.extname(fileURLToPath(import.meta.url))}`,
  import.meta.url,
);

export interface ThreadBackendOptions {
  readonly init: ThreadWorkerInit;
  /** For messages: `OnnxRuntime cpu worker 3`. */
  readonly label: string;
  /** Move input buffers instead of copying them (see WorkerPoolSettings.transferInputs). */
  readonly transferInputs: boolean;
}

interface PendingRun {
  readonly id: number;
  resolve(run: BatchRun<ServingOutput>): void;
  reject(error: KilnError): void;
}

/**
 * A worker on its own thread: the thread loads the engine and the model and owns the
 * Predictor; batches of ServingInput go in and settled results come back. A thread that
 * exits or throws fails its batch in flight with WORKER_CRASHED.
 */
export class ThreadBackend implements WorkerBackend<ServingInput, ServingOutput> {
  readonly kind = 'thread';
  private worker: Worker | undefined;
  private pending: PendingRun | undefined;
  private nextRunId = 1;
  private starting:
    { resolve(facts: WorkerFacts): void; reject(error: KilnError): void } | undefined;
  private stopping = false;
  private onStopped: (() => void) | undefined;
  private lastError: Error | undefined;
  private exited: Promise<void> = Promise.resolve();
  private readonly deathListeners: ((error: KilnError) => void)[] = [];

  constructor(private readonly options: ThreadBackendOptions) {}

  start(): Promise<WorkerFacts> {
    const worker = spawnModuleWorker(ENTRY, { workerData: { init: this.options.init } });
    this.worker = worker;
    this.exited = new Promise((resolve) =>
      worker.once('exit', (code) => resolve(this.onExit(code))),
    );
    worker.on('message', (message: FromWorker) => this.onMessage(message));
    worker.on('error', (error) => (this.lastError = error));
    worker.on('messageerror', (error) =>
      this.failPending(
        KilnError.wrap(error, KilnErrorCode.Internal, 'a batch result could not be received'),
      ),
    );
    return new Promise((resolve, reject) => (this.starting = { resolve, reject }));
  }

  run(inputs: readonly ServingInput[], signal: AbortSignal): Promise<BatchRun<ServingOutput>> {
    const worker = this.worker;
    if (!worker || this.starting)
      return Promise.reject(
        new KilnError(KilnErrorCode.Internal, `${this.options.label} is not ready`),
      );
    if (this.pending)
      return Promise.reject(
        new KilnError(KilnErrorCode.PredictorBusy, `${this.options.label} already runs a batch`),
      );
    const id = this.nextRunId++;
    return new Promise((resolve, reject) => {
      const onAbort = () => this.post({ type: 'abort', id });
      signal.addEventListener('abort', onAbort, { once: true });
      const done = () => signal.removeEventListener('abort', onAbort);
      this.pending = {
        id,
        resolve: (run) => (done(), resolve(run)),
        reject: (error) => (done(), reject(error)),
      };
      try {
        this.send(worker, id, inputs, this.options.transferInputs ? 'move' : 'copy');
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

  /** Posts a batch; memory that refuses to move (an engine's external buffer) is copied instead. */
  private send(
    worker: Worker,
    id: number,
    inputs: readonly ServingInput[],
    mode: TransferMode,
  ): void {
    const transfer = new TransferList(mode);
    const message: ToWorker = {
      type: 'run',
      id,
      inputs: inputs.map((input) => servingInputToMessage(input, transfer)),
    };
    try {
      worker.postMessage(message, transfer.transfer);
    } catch (error) {
      if (mode === 'copy') throw error;
      this.send(worker, id, inputs, 'copy');
    }
  }

  onDeath(listener: (error: KilnError) => void): void {
    this.deathListeners.push(listener);
  }

  async stop(): Promise<void> {
    if (!this.worker) return;
    this.stopping = true;
    const stopped = new Promise<void>((resolve) => (this.onStopped = resolve));
    this.post({ type: 'stop' });
    await Promise.race([stopped, this.exited]);
    // Released and done: end the thread even if an engine handle would keep its loop alive.
    await this.worker?.terminate();
    await this.exited;
  }

  async terminate(): Promise<void> {
    if (!this.worker) return;
    this.stopping = true;
    await this.worker.terminate();
    await this.exited;
  }

  private post(message: ToWorker): void {
    try {
      this.worker?.postMessage(message);
    } catch {
      // The thread is gone; its exit handler settles what waits on it.
    }
  }

  private onMessage(message: FromWorker): void {
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
        pending?.resolve({ results: message.results.map(decodeResult), timings: message.timings });
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
  }

  private onExit(code: number): void {
    this.worker = undefined;
    const reason = this.lastError ? `: ${this.lastError.message}` : '';
    const error = this.stopping
      ? new KilnError(KilnErrorCode.Closed, `${this.options.label} was stopped`)
      : new KilnError(
          KilnErrorCode.WorkerCrashed,
          `${this.options.label} crashed (thread exit code ${code})${reason}`,
          {
            details: { exitCode: code },
          },
        );
    if (this.starting) {
      this.starting.reject(error);
      this.starting = undefined;
    }
    this.failPending(error);
    if (!this.stopping) for (const listener of this.deathListeners) listener(error);
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
