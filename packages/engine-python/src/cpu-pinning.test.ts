import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CPU, parseServingProperties, type ServingContext } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { allowedCpusOf, parseCpuList } from './cpu-affinity.js';
import { createPythonEngine } from './provider.js';
import type { PythonModel } from './python-model.js';
import { probePython } from './probe.js';

const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () => probePython(PYTHON));

// Answers the worker's pid, the cores Python sees and OMP_NUM_THREADS.
const HANDLER = `
import json, os
from djl_python import Output

def handle(inputs):
    if inputs.is_empty():
        return None
    seen = {"pid": os.getpid(), "cores": sorted(os.sched_getaffinity(0)),
            "omp": os.environ.get("OMP_NUM_THREADS")}
    return Output().add(json.dumps(seen))
`;

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

async function load(): Promise<PythonModel> {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-python-pinning-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'model.py'), HANDLER);
  const engine = await createPythonEngine({ pythonExecutable: PYTHON }).load();
  const parsed = parseServingProperties('');
  return (await engine.loadModel({
    name: 'pinned',
    modelDir: dir,
    device: CPU,
    options: { pythonExecutable: PYTHON },
    properties: parsed,
  })) as PythonModel;
}

async function ask(
  context: ServingContext,
): Promise<{ pid: number; cores: number[]; omp: string }> {
  const [result] = await context.serve([{ body: new TextEncoder().encode('who') }]);
  if (!result?.ok) throw new Error('no answer');
  return (result.value as { value: { pid: number; cores: number[]; omp: string } }).value;
}

describe('parseCpuList', () => {
  it('reads the kernel’s cpulist format', () => {
    expect(parseCpuList('0-2,5\n')).toEqual([0, 1, 2, 5]);
    expect(parseCpuList('3')).toEqual([3]);
  });
});

describe.skipIf(!run || process.platform !== 'linux' || os.availableParallelism() < 2)(
  'Python workers pinned to cores',
  () => {
    it('each runs on the cores it was given, with OMP_NUM_THREADS their count', async () => {
      const model = await load();
      const last = os.availableParallelism() - 1;
      try {
        const first = await model.newServingContext({ intraOpThreads: 1, cpuCores: [0] });
        const second = await model.newServingContext({ intraOpThreads: 1, cpuCores: [last] });
        const plain = await model.newServingContext({ intraOpThreads: 1 });
        const [a, b, c] = await Promise.all([ask(first), ask(second), ask(plain)]);
        // What the kernel says of each process, from /proc/<pid>/status.
        expect(allowedCpusOf(a.pid)).toEqual([0]);
        expect(allowedCpusOf(b.pid)).toEqual([last]);
        expect(allowedCpusOf(c.pid)!.length).toBeGreaterThanOrEqual(2);
        expect([a.cores, b.cores]).toEqual([[0], [last]]);
        expect([a.omp, b.omp]).toEqual(['1', '1']);
        expect(first.pinnedCores).toEqual([0]);
        expect(second.pinnedCores).toEqual([last]);
        expect(plain.pinnedCores).toBeUndefined();
      } finally {
        await model.dispose();
      }
    });
  },
);
