import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';

export type PinResult =
  | { readonly pinned: true; readonly cores: readonly number[] }
  | { readonly pinned: false; readonly reason: string };

/**
 * Pins the calling thread to `cores` (TorchServe's `cpu_launcher_enable` idea, per worker
 * thread). Threads the caller starts afterwards — an engine's intra-op pool — inherit the
 * mask, so pin before loading the model. Linux only: the thread's kernel id comes from
 * /proc/thread-self and `taskset` applies the mask; elsewhere, or when that fails, nothing
 * changes and the reason is returned.
 */
export function pinCurrentThread(cores: readonly number[]): PinResult {
  if (process.platform !== 'linux')
    return { pinned: false, reason: `CPU pinning needs Linux (this is ${process.platform})` };
  if (cores.length === 0 || cores.some((c) => !Number.isSafeInteger(c) || c < 0)) {
    return { pinned: false, reason: `invalid core list [${cores.join(', ')}]` };
  }
  try {
    const tid = String(kernelThreadId());
    execFileSync('taskset', ['-p', '-c', cores.join(','), tid], { stdio: 'pipe', timeout: 5000 });
    const allowed = allowedCores();
    const wanted = [...cores].sort((a, b) => a - b).join(',');
    if (allowed.join(',') !== wanted) {
      return {
        pinned: false,
        reason: `the OS kept cores [${allowed.join(', ')}] instead of [${wanted}]`,
      };
    }
    return { pinned: true, cores: allowed };
  } catch (error) {
    return {
      pinned: false,
      reason: `could not pin to cores [${cores.join(', ')}]: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

/** Cores the calling thread may run on, from /proc/thread-self/status (Linux). */
export function allowedCores(): number[] {
  const status = readFileSync('/proc/thread-self/status', 'utf8');
  const list = /^Cpus_allowed_list:\s*(.+)$/m.exec(status)?.[1] ?? '';
  const cores: number[] = [];
  for (const part of list.split(',')) {
    const [from, to] = part.trim().split('-').map(Number);
    if (from === undefined || Number.isNaN(from)) continue;
    for (let c = from; c <= (to ?? from); c++) cores.push(c);
  }
  return cores;
}

/** The calling thread's kernel id (Linux), which worker threads do not otherwise expose. */
export function kernelThreadId(): number {
  return Number(readlinkSync('/proc/thread-self').split('/').pop());
}
