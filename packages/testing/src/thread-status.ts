import { readFileSync, readdirSync } from 'node:fs';

/**
 * One field of `/proc/self/task/<tid>/status` for each of this process's threads (Linux), by
 * thread id: e.g. `Cpus_allowed_list`, `voluntary_ctxt_switches`. Threads that end meanwhile
 * are left out.
 */
export function threadStatusField(field: string): Map<string, string> {
  const pattern = new RegExp(`^${field}:\\s*(\\S+)`, 'm');
  const values = new Map<string, string>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const status = readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
      values.set(tid, pattern.exec(status)?.[1] ?? '');
    } catch {
      // The thread ended meanwhile.
    }
  }
  return values;
}
