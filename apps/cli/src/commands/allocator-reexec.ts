import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  type Allocator,
  PRELOADED_ALLOCATOR_ENV,
  findAllocatorLibrary,
  preloadFor,
} from '@kiln/core';

/** Signals a supervising process passes on to the server it started. */
const FORWARDED_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const;

export type AllocatorStart =
  /** This process runs the server: its allocator is already in place (or glibc's is wanted). */
  | { readonly kind: 'here'; readonly warning?: string }
  /** The server runs in a child started with the allocator; this process only waits for it. */
  | { readonly kind: 'child'; readonly exited: Promise<never> };

/**
 * An allocator is chosen only by preloading it before the process starts, so `kiln serve`
 * with jemalloc or tcmalloc chosen starts itself once more with LD_PRELOAD set (the marker
 * in its environment stops a second start) and waits on it: stdio is shared, SIGTERM, SIGINT,
 * SIGHUP and SIGQUIT are passed on (the child drains as it would alone), and its exit code or
 * signal becomes this process's. The child leads a process group of its own, so a Ctrl-C
 * reaches it once, through here. A missing library throws before anything starts, naming
 * the package to install.
 */
export function startWithAllocator(allocator: Allocator): AllocatorStart {
  if (allocator === 'default') return { kind: 'here' };
  const library = findAllocatorLibrary(allocator);
  if (process.env[PRELOADED_ALLOCATOR_ENV] === library) {
    return mapped(library)
      ? { kind: 'here' }
      : { kind: 'here', warning: `allocator ${allocator}: ${library} was not loaded` };
  }
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, ...preloadFor(library) },
    detached: true,
  });
  const forward = (signal: NodeJS.Signals) => () => {
    child.kill(signal);
  };
  const listeners = FORWARDED_SIGNALS.map((signal) => {
    const listener = forward(signal);
    process.on(signal, listener);
    return [signal, listener] as const;
  });
  const exited = new Promise<never>((_, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      for (const [name, listener] of listeners) process.off(name, listener);
      // Killed by a signal, this process dies of the same one, as the shell would see it.
      if (signal) process.kill(process.pid, signal);
      else process.exit(code ?? 1);
    });
  });
  return { kind: 'child', exited };
}

/** Whether the library is mapped into this process (its LD_PRELOAD took). */
function mapped(library: string): boolean {
  try {
    // The map names the file as resolved (/lib may be a link to /usr/lib).
    return readFileSync('/proc/self/maps', 'utf8').includes(`/${path.basename(library)}\n`);
  } catch {
    return true;
  }
}
