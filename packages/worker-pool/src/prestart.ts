import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHARE_ENV, type Worker } from 'node:worker_threads';
import { spawnModuleWorker } from '@kiln/core/spawn-worker';

// Host threads started ahead of need. Light on purpose (Node's modules and one of core's):
// `kiln serve` imports it before its own modules, so that a model's thread loads Node and
// Kiln's modules while the command line and the server load theirs.

// The host's entry sits beside this file, as .ts from source and as .js once built.
const HOST_ENTRY = new URL(
  `./host-thread-main${path.extname(fileURLToPath(import.meta.url))}`,
  import.meta.url,
);

/** A new thread running a pool host. The process environment is shared: native engines read their thread settings there. */
export function spawnHostWorker(hints: HostHints = {}): Worker {
  return spawnModuleWorker(HOST_ENTRY, { env: SHARE_ENV, workerData: hints });
}

/** What a host thread started ahead of need may prepare while it waits for its worker. */
export interface HostHints {
  /**
   * Local model folders this process is about to serve, the first one first: the thread loads
   * the engine the first one would run on, where the pool's worker will look for it.
   */
  readonly preloadModels?: readonly string[];
}

/** Threads started ahead of need and not taken yet, the oldest first; each still running. */
const spares: Worker[] = [];

/**
 * Starts a host thread before a worker needs one: Node's start and Kiln's modules on that
 * thread then overlap whatever this thread does meanwhile (a server importing its own modules),
 * and the next worker with a thread of its own takes it. A spare no worker took after
 * `endAfterMs` (30 s by default) ends, so that a server whose models run elsewhere does not
 * keep it; it never keeps the process alive. With `preloadModels`, it loads the first model's
 * engine meanwhile (see HostHints). Returns its thread id.
 */
export function prestartHostThread(options: { endAfterMs?: number } & HostHints = {}): number {
  const worker = spawnHostWorker(
    options.preloadModels ? { preloadModels: options.preloadModels } : {},
  );
  worker.unref();
  spares.push(worker);
  const forget = () => {
    const index = spares.indexOf(worker);
    if (index >= 0) spares.splice(index, 1);
    return index >= 0;
  };
  worker.once('exit', forget);
  setTimeout(() => {
    if (forget()) void worker.terminate();
  }, options.endAfterMs ?? 30_000).unref();
  return worker.threadId;
}

/** Spare host threads waiting for a worker. */
export function spareHostThreads(): number {
  return spares.length;
}

/** The oldest spare, which leaves the spares; none when no spare is running. */
export function takeSpareHostWorker(): Worker | undefined {
  return spares.shift();
}

/** Ends the spares no worker took (a process that turns out to serve no model itself). */
export function endSpareHostThreads(): void {
  for (const spare of spares.splice(0)) void spare.terminate();
}
