import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  formatCpuList,
  parseCpuList,
  planCores,
  processCores,
  readCpuTopology,
} from './cpu-topology.js';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A fake /sys: `cpus[i]` = [package, core_id] of logical CPU i; `nodes[n]` = its cpulist. */
function fakeSys(cpus: [number, number][], nodes?: string[]): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'kiln-sys-'));
  roots.push(root);
  const cpuDir = path.join(root, 'devices/system/cpu');
  cpus.forEach(([pkg, core], cpu) => {
    const dir = path.join(cpuDir, `cpu${cpu}`, 'topology');
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'physical_package_id'), `${pkg}\n`);
    writeFileSync(path.join(dir, 'core_id'), `${core}\n`);
  });
  writeFileSync(path.join(cpuDir, 'online'), `0-${cpus.length - 1}\n`);
  nodes?.forEach((list, node) => {
    const dir = path.join(root, 'devices/system/node', `node${node}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'cpulist'), `${list}\n`);
  });
  return root;
}

const all = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('readCpuTopology and planCores', () => {
  it('one socket, two cores: one core per worker, none free; one worker leaves one free', () => {
    const topology = readCpuTopology(
      fakeSys([
        [0, 0],
        [0, 1],
      ]),
    );
    expect(topology.nodes).toEqual([0]);
    expect(topology.cpus.map((c) => c.cpu)).toEqual([0, 1]);
    expect(planCores(topology, { workers: 2, logicalCores: false, allowed: all(2) })).toEqual({
      sets: [[0], [1]],
      free: [],
    });
    expect(planCores(topology, { workers: 1, logicalCores: false, allowed: all(2) })).toEqual({
      sets: [[0, 1]],
      free: [],
    });
    // Three workers on two cores share them round-robin.
    expect(planCores(topology, { workers: 3, logicalCores: false, allowed: all(2) }).sets).toEqual([
      [0],
      [1],
      [0],
    ]);
  });

  it('hyperthreaded, 8 threads on 4 cores: physical cores only unless logical ones are asked for', () => {
    // Linux numbers siblings apart: cpu0 and cpu4 share core 0.
    const pairs: [number, number][] = [0, 1, 2, 3, 0, 1, 2, 3].map((core) => [0, core]);
    const topology = readCpuTopology(fakeSys(pairs, ['0-7']));
    expect(planCores(topology, { workers: 2, logicalCores: false, allowed: all(8) })).toEqual({
      sets: [
        [0, 1],
        [2, 3],
      ],
      free: [4, 5, 6, 7],
    });
    expect(planCores(topology, { workers: 2, logicalCores: true, allowed: all(8) })).toEqual({
      sets: [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
      ],
      free: [],
    });
    // Three workers on four cores: one core left for the event loop (and the siblings).
    expect(planCores(topology, { workers: 3, logicalCores: false, allowed: all(8) })).toEqual({
      sets: [[0], [1], [2]],
      free: [3, 4, 5, 6, 7],
    });
    // Only what the process may use counts.
    expect(
      planCores(topology, { workers: 2, logicalCores: false, allowed: [2, 3, 6, 7] }).sets,
    ).toEqual([[2], [3]]);
  });

  it('two NUMA nodes: a node is chosen whole, and a worker never straddles nodes when they divide', () => {
    // 2 sockets × 2 cores × 2 threads: node 0 = cpus 0,1,4,5; node 1 = 2,3,6,7.
    const pairs: [number, number][] = [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ];
    const topology = readCpuTopology(fakeSys(pairs, ['0-1,4-5', '2-3,6-7']));
    expect(topology.nodes).toEqual([0, 1]);
    expect(topology.cpus.find((c) => c.cpu === 6)).toEqual({ cpu: 6, core: '1:0', node: 1 });
    expect(planCores(topology, { workers: 2, logicalCores: false, allowed: all(8) }).sets).toEqual([
      [0, 1],
      [2, 3],
    ]);
    expect(
      planCores(topology, { workers: 2, logicalCores: false, node: 1, allowed: all(8) }),
    ).toEqual({ sets: [[2], [3]], free: [0, 1, 4, 5, 6, 7] });
    expect(
      planCores(topology, { workers: 1, logicalCores: true, node: 0, allowed: all(8) }).sets,
    ).toEqual([[0, 1, 4, 5]]);
    expect(() =>
      planCores(topology, { workers: 1, logicalCores: false, node: 2, allowed: all(8) }),
    ).toThrow(/NUMA node 2 does not exist: this machine has nodes 0, 1/);
    expect(() =>
      planCores(topology, { workers: 1, logicalCores: false, node: 1, allowed: [0, 1] }),
    ).toThrow(/no core to pin to on NUMA node 1/);
  });

  it('reads and writes the kernel’s cpulist format', () => {
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(formatCpuList([11, 0, 1, 2, 3, 8, 10])).toBe('0-3,8,10-11');
  });

  it.skipIf(process.platform !== 'linux')('reads this machine’s /sys', () => {
    const topology = readCpuTopology();
    expect(topology.cpus.length).toBeGreaterThanOrEqual(1);
    const plan = planCores(topology, { workers: 1, logicalCores: true, allowed: processCores() });
    expect(plan.sets[0]!.length).toBeGreaterThanOrEqual(1);
  });
});
