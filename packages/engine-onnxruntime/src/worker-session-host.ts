import type { Worker } from 'node:worker_threads';
import {
  KilnError,
  KilnErrorCode,
  type NDList,
  type NumericDType,
  type TensorDescriptor,
  type TypedArray,
  siblingModule,
  spawnModuleWorker,
  typedArrayConstructor,
} from '@kiln/core';
import { type WireTensor, fromWire, ownBuffers, toWire } from './ort-tensors.js';
import type { OrtProfile } from './profiling/ort-profile.js';
import type { OrtSessionConfig } from './session-config.js';
import type { RunTiming, SessionHost } from './session-host.js';
import type { SessionReply, SessionRequest, SessionWorkerData } from './worker-protocol.js';

export const SESSION_WORKER_MODULE = siblingModule(import.meta.url, './session-worker');

interface Pending {
  resolve(reply: SessionReply): void;
  reject(error: KilnError): void;
}

/**
 * A session in a dedicated worker thread, so that the owner's event loop keeps serving while
 * the model runs. Inputs are copied to the worker once; outputs come back by transfer, not
 * copy. If the thread dies, every pending and later call fails with WORKER_CRASHED.
 */
export class WorkerSessionHost implements SessionHost {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: KilnError | undefined;
  private lastError: string | undefined;
  private closed = false;
  private readonly spare: ArrayBuffer[] = [];

  private constructor(
    private readonly worker: Worker,
    readonly inputs: readonly TensorDescriptor[],
    readonly outputs: readonly TensorDescriptor[],
  ) {
    worker.on('message', (reply: SessionReply) => this.settle(reply));
    worker.on('error', (error) => (this.lastError = error.message));
    worker.on('exit', (code) => this.exited(code));
    // An idle session must not keep the process alive; a running one does.
    worker.unref();
  }

  static async start(modelPath: string, config: OrtSessionConfig): Promise<WorkerSessionHost> {
    const data: SessionWorkerData = { modelPath, config };
    return WorkerSessionHost.attach(spawnModuleWorker(SESSION_WORKER_MODULE, { workerData: data }));
  }

  /** Waits for a session worker (started with SESSION_WORKER_MODULE) to create its session. */
  static attach(worker: Worker): Promise<WorkerSessionHost> {
    return new Promise((resolve, reject) => {
      let lastError: string | undefined;
      const cleanup = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const onMessage = (reply: SessionReply) => {
        cleanup();
        if (reply.type === 'ready') {
          resolve(new WorkerSessionHost(worker, reply.inputs, reply.outputs));
        } else {
          void worker.terminate();
          reject(
            reply.type === 'start-failed'
              ? KilnError.fromJSON(reply.error)
              : new KilnError(
                  KilnErrorCode.Internal,
                  `unexpected ${reply.type} from a starting session worker`,
                ),
          );
        }
      };
      const onError = (error: Error) => (lastError = error.message);
      const onExit = (code: number) => {
        cleanup();
        reject(
          new KilnError(
            KilnErrorCode.WorkerCrashed,
            `OnnxRuntime session worker exited with code ${code} while starting${lastError ? `: ${lastError}` : ''}`,
          ),
        );
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
    });
  }

  async run(input: NDList): Promise<{ output: NDList; timing: RunTiming }> {
    const inputs = toWire(input).map((t) => this.stage(t));
    const reply = await this.request(
      { type: 'run', id: this.nextId++, inputs },
      ownBuffers(inputs),
    );
    const { outputs, timing, inputBuffers } = reply as Extract<SessionReply, { type: 'outputs' }>;
    this.spare.push(...inputBuffers);
    this.spare.splice(0, Math.max(0, this.spare.length - MAX_SPARE_BUFFERS));
    return { output: fromWire(outputs), timing };
  }

  async endProfiling(options: { skipRuns?: number } = {}): Promise<OrtProfile> {
    const reply = await this.request({
      type: 'end-profiling',
      id: this.nextId++,
      skipRuns: options.skipRuns ?? 0,
    });
    return (reply as Extract<SessionReply, { type: 'profile' }>).profile;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.failure) return;
    // The worker releases its session first; the thread is then ended from here, since
    // loaders it registered may keep its event loop alive.
    await this.request({ type: 'close', id: this.nextId++ }, [], true).catch(() => undefined);
    this.worker.ref();
    await this.worker.terminate();
  }

  /**
   * Copies a tensor into a buffer that then moves to the worker. Buffers come back with the
   * answer and are filled again on the next call: a fresh buffer per call would cost a page
   * fault per 4 KiB (about 0.25 ms for one 224×224 image, more than the copy itself).
   */
  private stage(tensor: WireTensor): WireTensor {
    if (Array.isArray(tensor.data)) return tensor;
    const data = tensor.data as TypedArray;
    const index = this.spare.findIndex(
      (b) => b.byteLength >= data.byteLength && b.byteLength <= 2 * data.byteLength,
    );
    const buffer = index >= 0 ? this.spare.splice(index, 1)[0]! : new ArrayBuffer(data.byteLength);
    const view = new (typedArrayConstructor(tensor.dtype as NumericDType))(buffer, 0, data.length);
    view.set(data as never);
    return { ...tensor, data: view };
  }

  private request(
    message: SessionRequest,
    transfer: ArrayBuffer[] = [],
    closing = false,
  ): Promise<SessionReply> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed && !closing)
      return Promise.reject(
        new KilnError(KilnErrorCode.Closed, 'the OnnxRuntime session is closed'),
      );
    return new Promise<SessionReply>((resolve, reject) => {
      this.pending.set(message.id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage(message, transfer);
    });
  }

  private settle(reply: SessionReply): void {
    if (!('id' in reply)) return;
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.type === 'failed') pending.reject(KilnError.fromJSON(reply.error));
    else pending.resolve(reply);
  }

  private exited(code: number): void {
    const reason = this.lastError ? `: ${this.lastError}` : '';
    this.failure = this.closed
      ? new KilnError(KilnErrorCode.Closed, 'the OnnxRuntime session is closed')
      : new KilnError(
          KilnErrorCode.WorkerCrashed,
          `OnnxRuntime session worker exited unexpectedly with code ${code}${reason}`,
        );
    for (const pending of this.pending.values()) pending.reject(this.failure);
    this.pending.clear();
  }
}

/** Input buffers kept for reuse: enough for one call of a model with several inputs. */
const MAX_SPARE_BUFFERS = 8;
