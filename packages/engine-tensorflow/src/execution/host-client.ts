import type { Worker } from 'node:worker_threads';
import {
  KilnError,
  KilnErrorCode,
  type NDList,
  TransferList,
  isSerializedKilnError,
  ndListFromMessage,
  ndListToMessage,
  spawnModuleWorker,
} from '@kiln/core';
import type { TfModelSpec } from '../model/load-model.js';
import { cancelledError } from './cancellation.js';
import type { TfRuntimeFacts } from '../runtime/resolve-runtime.js';
import type { TfMemoryInfo } from '../runtime/tfjs-api.js';
import type {
  HostConfig,
  HostReplies,
  HostReply,
  HostRequest,
  HostStatus,
  HostedModelFacts,
} from './host-protocol.js';

const HOST_MODULE = new URL(
  `./host-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`,
  import.meta.url,
);

type Pending = { resolve(value: unknown): void; reject(error: KilnError): void };
type RequestBody = HostRequest extends infer R
  ? R extends HostRequest
    ? Omit<R, 'id'>
    : never
  : never;

/**
 * A worker thread running a tfjs runtime (see host-worker.ts), seen from the thread that
 * started it. Requests are answered in the order they finish; a crash fails every pending
 * request with WORKER_CRASHED. The thread does not keep the process alive while idle.
 */
export class TfHost {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: KilnError | undefined;

  private constructor(
    private readonly worker: Worker,
    readonly facts: TfRuntimeFacts,
  ) {
    worker.on('message', (reply: HostReply) => this.settle(reply));
    worker.on('error', (error) =>
      this.fail(KilnError.wrap(error, KilnErrorCode.WorkerCrashed, 'TensorFlow thread crashed')),
    );
    worker.on('exit', (code) =>
      this.fail(
        new KilnError(KilnErrorCode.WorkerCrashed, `TensorFlow thread exited (code ${code})`),
      ),
    );
    worker.unref();
  }

  /** Starts a host thread and waits until its runtime is ready (or says why it is not). */
  static async start(config: HostConfig): Promise<TfHost> {
    const worker = spawnModuleWorker(HOST_MODULE, { workerData: config });
    const status = await firstStatus(worker).catch((error: unknown) => {
      void worker.terminate();
      throw KilnError.wrap(
        error,
        KilnErrorCode.EngineUnavailable,
        'cannot start a TensorFlow thread',
      );
    });
    if (status.status === 'failed') {
      await worker.terminate();
      throw KilnError.fromJSON(status.error);
    }
    return new TfHost(worker, status.facts);
  }

  load(spec: TfModelSpec): Promise<HostedModelFacts> {
    return this.request({ op: 'load', spec });
  }

  /** Runs a model; the inputs are copied to the host, the caller's arrays stay untouched. */
  async forward(handle: number, input: NDList, signal?: AbortSignal): Promise<NDList> {
    if (signal?.aborted) throw cancelledError(signal);
    const transfer = new TransferList('copy');
    const inputs = ndListToMessage(input, transfer);
    const reply = this.request({ op: 'forward', handle, inputs }, transfer.transfer);
    const message = signal ? await abortable(reply, signal) : await reply;
    return ndListFromMessage(message);
  }

  unload(handle: number): Promise<null> {
    return this.request({ op: 'unload', handle });
  }

  memory(): Promise<TfMemoryInfo> {
    return this.request({ op: 'memory' });
  }

  /** Stops the thread; pending requests fail with CLOSED. Idempotent. */
  async close(): Promise<void> {
    if (this.failure) return;
    this.fail(new KilnError(KilnErrorCode.Closed, 'the TensorFlow thread was closed'));
    await this.worker.terminate();
  }

  private request<R extends RequestBody>(
    body: R,
    transfer: ArrayBuffer[] = [],
  ): Promise<HostReplies[R['op']]> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    const reply = new Promise<HostReplies[R['op']]>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
    });
    if (this.pending.size === 1) this.worker.ref(); // keep the process alive while work is pending
    this.worker.postMessage({ ...body, id } as HostRequest, transfer);
    return reply;
  }

  private settle(reply: HostReply): void {
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if (reply.ok) pending.resolve(reply.value);
    else
      pending.reject(
        isSerializedKilnError(reply.error)
          ? KilnError.fromJSON(reply.error)
          : new KilnError(KilnErrorCode.Internal, 'malformed reply'),
      );
  }

  private fail(error: KilnError): void {
    this.failure ??= error;
    for (const pending of this.pending.values()) pending.reject(this.failure);
    this.pending.clear();
    this.worker.unref();
  }
}

/** The host's first message, or why it never came. */
function firstStatus(worker: Worker): Promise<HostStatus> {
  return new Promise((resolve, reject) => {
    const onMessage = (status: HostStatus) => {
      off();
      resolve(status);
    };
    const onError = (error: Error) => {
      off();
      reject(error);
    };
    const onExit = (code: number) => {
      off();
      reject(new Error(`it exited with code ${code} before it was ready`));
    };
    // Only these come off: a Worker keeps listeners of its own (removeAllListeners breaks it).
    const off = () => worker.off('message', onMessage).off('error', onError).off('exit', onExit);
    worker.on('message', onMessage).on('error', onError).on('exit', onExit);
  });
}

/** Rejects as soon as the signal aborts; the host's late answer is then dropped. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelledError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
