import { readFileSync } from 'node:fs';

/** The logical CPUs a process's main thread may run on (Linux /proc), or undefined. */
export function allowedCpusOf(pid: number): number[] | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const list = /^Cpus_allowed_list:\s*(.+)$/m.exec(status)?.[1];
    return list === undefined ? undefined : parseCpuList(list);
  } catch {
    return undefined;
  }
}

/** `0-2,5` → [0, 1, 2, 5] (the kernel's cpulist format), sorted and without repeats. */
export function parseCpuList(text: string): number[] {
  const cpus = new Set<number>();
  for (const part of text.trim().split(',')) {
    const [from, to] = part.trim().split('-').map(Number);
    if (from === undefined || !Number.isSafeInteger(from)) continue;
    const last = to !== undefined && Number.isSafeInteger(to) ? to : from;
    for (let cpu = from; cpu <= last; cpu++) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}
