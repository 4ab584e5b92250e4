import type { Worker, WorkerOptions } from 'node:worker_threads';
import { KilnError, KilnErrorCode, spawnModuleWorker } from '@kiln/core';
import { spawnHostWorker, takeSpareHostWorker } from './prestart.js';
import type { FromHost, ToHost } from './worker-protocol.js';

// With prestart.ts (host threads started ahead of need), the one place in Kiln that starts
// threads for inference: host threads for the pool's workers, and threads of other modules
// that must keep work off the event loop (a generation pool's prompt tokenizer).

/** What a worker hosted on a thread hears from it. */
export interface HostedListener {
  message(message: FromHost): void;
  /** A message from the thread could not be read: what waits on an answer fails. */
  lost(error: KilnError): void;
  /** The thread ended (crashed, or was terminated): every hosted worker is gone. */
  exit(error: KilnError): void;
}

/**
 * A thread hosting one or more pool workers. Messages carry the worker's number; the thread
 * ends when its last worker detaches, unless it is a shared host (an engine that loads in one
 * thread per process), which lives as long as the process and keeps it alive only while it
 * hosts a worker.
 */
export class HostThread {
  private readonly listeners = new Map<number, HostedListener>();
  private readonly worker: Worker;
  private lastError: Error | undefined;
  private ended = false;
  private nextWorker = 1;
  readonly exited: Promise<void>;

  /** `started`: a thread started ahead of need (prestartHostThread) to host this one's workers. */
  constructor(
    readonly shared: boolean,
    started?: Worker,
  ) {
    this.worker = started ?? spawnHostWorker();
    this.exited = new Promise((resolve) =>
      this.worker.once('exit', (code) => resolve(this.onExit(code))),
    );
    this.worker.on('message', (message: FromHost) =>
      this.listeners.get(message.worker)?.message(message),
    );
    this.worker.on('error', (error) => (this.lastError = error));
    this.worker.on('messageerror', (error) => {
      const failure = KilnError.wrap(error, KilnErrorCode.Internal, 'a message could not be read');
      for (const listener of this.listeners.values()) listener.lost(failure);
    });
    if (shared) this.worker.unref();
  }

  get alive(): boolean {
    return !this.ended;
  }

  /** Hosts one more worker; returns its number for `post`. */
  attach(listener: HostedListener): number {
    const id = this.nextWorker++;
    this.listeners.set(id, listener);
    this.worker.ref();
    return id;
  }

  /** The thread's id, as `threadId` reads on it. */
  get threadId(): number {
    return this.worker.threadId;
  }

  /** Forgets a worker; a thread of its own ends with it. */
  async detach(id: number): Promise<void> {
    this.listeners.delete(id);
    if (this.listeners.size > 0) return;
    if (this.shared) {
      this.worker.unref();
      return;
    }
    await this.terminate();
  }

  /** Posts to the thread; throws when the message cannot be sent (e.g. it holds a function). */
  post(message: ToHost, transfer: ArrayBuffer[] = []): void {
    if (this.ended) return; // its exit has settled, or will settle, what waits on it
    this.worker.postMessage(message, transfer);
  }

  /** Ends the thread at once; every hosted worker hears `exit`. */
  async terminate(): Promise<void> {
    await this.worker.terminate();
    await this.exited;
  }

  private onExit(code: number): void {
    this.ended = true;
    const reason = this.lastError ? `: ${this.lastError.message}` : '';
    const error = new KilnError(
      KilnErrorCode.WorkerCrashed,
      `its thread exited (code ${code})${reason}`,
      { details: { exitCode: code } },
    );
    const listeners = [...this.listeners.values()];
    this.listeners.clear();
    for (const listener of listeners) listener.exit(error);
  }
}

const sharedHosts = new Map<string, HostThread>();

/** A thread for one worker alone: a spare when one is running, else a new one. */
export function ownHostThread(): HostThread {
  return new HostThread(false, takeSpareHostWorker());
}

/** The process's shared host thread for `key` (an engine), started on first use. */
export function sharedHostThread(key: string): HostThread {
  let host = sharedHosts.get(key);
  if (!host?.alive) {
    host = new HostThread(true);
    sharedHosts.set(key, host);
  }
  return host;
}

/**
 * Starts a thread running a module of its own (a generation pool's prompt tokenizer). The
 * caller owns the thread and its messages.
 */
export function startInferenceThread(moduleUrl: URL, options: WorkerOptions = {}): Worker {
  return spawnModuleWorker(moduleUrl, options);
}
