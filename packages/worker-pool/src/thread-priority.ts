import os from 'node:os';
import { kernelThreadId } from './cpu-pinning.js';

export type PriorityResult =
  | { readonly lowered: true; readonly nice: number }
  | { readonly lowered: false; readonly reason: string };

/**
 * Makes the calling thread `by` steps nicer than it is (Linux: a thread's kernel id is a
 * valid target of setpriority). Engine threads it starts afterwards inherit the value, so call
 * it before loading the model. Raising niceness needs no privilege; elsewhere, or on failure,
 * nothing changes and the reason is returned.
 */
export function lowerThreadPriority(by: number): PriorityResult {
  if (process.platform !== 'linux') {
    return {
      lowered: false,
      reason: `per-thread priority needs Linux (this is ${process.platform})`,
    };
  }
  try {
    const tid = kernelThreadId();
    const nice = Math.min(19, os.getPriority(tid) + by);
    os.setPriority(tid, nice);
    return { lowered: true, nice: os.getPriority(tid) };
  } catch (error) {
    return { lowered: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
