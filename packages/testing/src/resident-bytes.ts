import { readFile } from 'node:fs/promises';

/**
 * This process's resident bytes counted page by page (Linux): the kernel's running total, which
 * `process.memoryUsage().rss` reads, is kept per CPU and lags by several MiB.
 */
export async function residentBytes(): Promise<number> {
  const rollup = await readFile('/proc/self/smaps_rollup', 'utf8');
  return Number(/^Rss:\s+(\d+) kB/m.exec(rollup)![1]) * 1024;
}
