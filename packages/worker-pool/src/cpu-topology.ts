import { existsSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** One logical CPU: its number, the physical core it belongs to and its NUMA node. */
export interface LogicalCpu {
  readonly cpu: number;
  /** `package:core_id`: logical CPUs sharing it are hyperthread siblings. */
  readonly core: string;
  readonly node: number;
}

/** The machine's online logical CPUs, read from /sys (Linux). */
export interface CpuTopology {
  readonly cpus: readonly LogicalCpu[];
  /** NUMA node numbers (one node, 0, where /sys has none). */
  readonly nodes: readonly number[];
}

/** How a model's workers are pinned (TorchServe's launcher flags, per model). */
export interface PinningRequest {
  /** Workers (or `--ninstances`) the chosen cores are split between. */
  readonly workers: number;
  /** Hyperthread siblings count as cores (`--use_logical_core`); physical cores only otherwise. */
  readonly logicalCores: boolean;
  /** Only this NUMA node's cores (`--node_id`). */
  readonly node?: number | undefined;
  /** Logical CPUs this process may run on (its affinity before anything was pinned). */
  readonly allowed: readonly number[];
}

export interface CorePlan {
  /** Set i is worker slot i's (mod the number of sets); disjoint unless workers outnumber cores. */
  readonly sets: readonly (readonly number[])[];
  /** Allowed logical CPUs in no set: where the server's event loop may run. */
  readonly free: readonly number[];
}

/**
 * Reads the online CPUs' topology under `root` (`/sys`; tests pass a folder laid out alike):
 * `devices/system/cpu/cpuN/topology/{physical_package_id,core_id}` and
 * `devices/system/node/nodeN/cpulist`.
 */
export function readCpuTopology(root = '/sys'): CpuTopology {
  const cpuDir = path.join(root, 'devices/system/cpu');
  const online = readOptional(path.join(cpuDir, 'online'));
  const numbers = online
    ? parseCpuList(online)
    : readdirSync(cpuDir)
        .map((name) => /^cpu(\d+)$/.exec(name)?.[1])
        .filter((n): n is string => n !== undefined)
        .map(Number);
  const nodeOf = new Map<number, number>();
  const nodeDir = path.join(root, 'devices/system/node');
  const nodes = existsSync(nodeDir)
    ? readdirSync(nodeDir)
        .map((name) => /^node(\d+)$/.exec(name)?.[1])
        .filter((n): n is string => n !== undefined)
        .map(Number)
        .sort((a, b) => a - b)
    : [];
  for (const node of nodes) {
    const list = readOptional(path.join(nodeDir, `node${node}`, 'cpulist')) ?? '';
    for (const cpu of parseCpuList(list)) nodeOf.set(cpu, node);
  }
  const cpus = numbers
    .filter((cpu) => existsSync(path.join(cpuDir, `cpu${cpu}`, 'topology')))
    .map((cpu): LogicalCpu => {
      const topology = path.join(cpuDir, `cpu${cpu}`, 'topology');
      const pkg = readOptional(path.join(topology, 'physical_package_id')) ?? '0';
      // Without core_id every logical CPU is its own core.
      const core = readOptional(path.join(topology, 'core_id')) ?? `cpu${cpu}`;
      return { cpu, core: `${pkg}:${core}`, node: nodeOf.get(cpu) ?? nodes[0] ?? 0 };
    })
    .sort((a, b) => a.cpu - b.cpu);
  return { cpus, nodes: nodes.length > 0 ? nodes : [0] };
}

/**
 * Chooses the cores (one logical CPU per physical core unless `logicalCores`, only `node`'s
 * when given, only allowed ones) and splits them evenly and disjointly between the workers,
 * node by node in order so a worker's cores share a node where they can. Cores that do not
 * divide evenly stay free. With more workers than cores, workers share cores round-robin.
 */
export function planCores(topology: CpuTopology, request: PinningRequest): CorePlan {
  const allowed = new Set(request.allowed);
  if (request.node !== undefined && !topology.nodes.includes(request.node)) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `NUMA node ${request.node} does not exist: this machine has node${topology.nodes.length > 1 ? 's' : ''} ${topology.nodes.join(', ')}`,
    );
  }
  const seenCores = new Set<string>();
  const chosen: LogicalCpu[] = [];
  const ordered = [...topology.cpus].sort((a, b) => a.node - b.node || a.cpu - b.cpu);
  for (const cpu of ordered) {
    if (!allowed.has(cpu.cpu)) continue;
    if (request.node !== undefined && cpu.node !== request.node) continue;
    if (!request.logicalCores) {
      if (seenCores.has(cpu.core)) continue;
      seenCores.add(cpu.core);
    }
    chosen.push(cpu);
  }
  if (chosen.length === 0) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `no core to pin to${request.node === undefined ? '' : ` on NUMA node ${request.node}`} among the cores this process may use (${request.allowed.join(', ')})`,
    );
  }
  const workers = Math.max(1, request.workers);
  const width = Math.max(1, Math.floor(chosen.length / workers));
  const sets: number[][] = [];
  for (let i = 0; i < workers; i++) {
    const start = (i * width) % chosen.length;
    sets.push(chosen.slice(start, start + width).map((c) => c.cpu));
  }
  const used = new Set(sets.flat());
  const free = [...allowed].filter((cpu) => !used.has(cpu)).sort((a, b) => a - b);
  return { sets, free };
}

/** `0-3,8,10-11` → [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format). */
export function parseCpuList(text: string): number[] {
  const cpus: number[] = [];
  for (const part of text.trim().split(',')) {
    if (part.trim() === '') continue;
    const [from, to] = part.trim().split('-').map(Number);
    if (from === undefined || !Number.isSafeInteger(from)) continue;
    const last = to !== undefined && Number.isSafeInteger(to) ? to : from;
    for (let cpu = from; cpu <= last; cpu++) cpus.push(cpu);
  }
  return cpus;
}

/** [0, 1, 2, 5] → `0-2,5`. */
export function formatCpuList(cpus: readonly number[]): string {
  const sorted = [...new Set(cpus)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j === i ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j;
  }
  return parts.join(',');
}

let processCpus: readonly number[] | undefined;

/**
 * Logical CPUs this process may run on, as its main thread had them the first time this was
 * asked (before the server pinned its event loop); 0 … n-1 where /proc is absent.
 */
export function processCores(): readonly number[] {
  if (processCpus) return processCpus;
  const status = readOptional('/proc/self/status');
  const list = status ? /^Cpus_allowed_list:\s*(.+)$/m.exec(status)?.[1] : undefined;
  processCpus = list ? parseCpuList(list) : [];
  if (processCpus.length === 0)
    processCpus = Array.from({ length: os.availableParallelism() }, (_, i) => i);
  return processCpus;
}

function readOptional(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}
