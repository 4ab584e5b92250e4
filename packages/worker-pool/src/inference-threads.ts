import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHARE_ENV, type Worker, type WorkerOptions } from 'node:worker_threads';
import { KilnError, KilnErrorCode, spawnModuleWorker } from '@kiln/core';
import type { FromHost, ToHost } from './worker-protocol.js';

// The one place in Kiln that starts threads for inference: host threads for the pool's
// workers, and threads of other modules that must keep work off the event loop (a generation
// pool's prompt tokenizer).

// The host's entry sits beside this file, as .ts from source and as .js once built.
const HOST_ENTRY = new URL(
  `./host-thread-main${path.extname(fileURLToPath(import.meta.url))}`,
  import.meta.url,
);

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

  constructor(readonly shared: boolean) {
    // The process environment is shared: native engines read their thread settings there.
    this.worker = spawnModuleWorker(HOST_ENTRY, { env: SHARE_ENV });
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

  /** Waits unattached without keeping the process alive (a spare). */
  park(): void {
    this.worker.unref();
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

/** Threads started ahead of need (prestartHostThread), the oldest taken first. */
const spareHosts: HostThread[] = [];

/**
 * Starts a host thread before a worker needs one: Node's start and Kiln's modules on that
 * thread then overlap whatever this thread does meanwhile (a server importing its own modules),
 * and the next worker with a thread of its own takes it. A spare no worker took after
 * `endAfterMs` (30 s by default) ends, so that a server whose models run elsewhere does not
 * keep it; it never keeps the process alive. Returns its thread id.
 */
export function prestartHostThread(options: { endAfterMs?: number } = {}): number {
  const host = new HostThread(false);
  host.park();
  spareHosts.push(host);
  setTimeout(() => {
    const index = spareHosts.indexOf(host);
    if (index < 0) return;
    spareHosts.splice(index, 1);
    void host.terminate();
  }, options.endAfterMs ?? 30_000).unref();
  return host.threadId;
}

/** Ends the spares no worker took (a process that turns out to serve no model itself). */
export function endSpareHostThreads(): void {
  for (const spare of spareHosts.splice(0)) void spare.terminate();
}

/** A thread for one worker alone: a spare when one is running, else a new one. */
export function ownHostThread(): HostThread {
  // A spare leaves the list when taken, so every one in it hosts nothing yet.
  for (let spare = spareHosts.shift(); spare; spare = spareHosts.shift()) {
    if (spare.alive) return spare;
  }
  return new HostThread(false);
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
