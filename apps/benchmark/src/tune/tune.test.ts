import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SERVING_SETTINGS, findAllocatorLibrary } from '@kiln/core';
import { probeOrt } from '@kiln/engine-onnxruntime';
import { mlpModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMPTY_SUMMARY } from '../stats/latency-histogram.js';
import type { LevelResult } from '../results.js';
import { servingPropertiesText } from './recommendation.js';
import { bestLevel, runTune } from './tune.js';

const level = (throughput: number, p99Ms: number): LevelResult => ({
  level: 1,
  throughput,
  requests: 10,
  errors: 0,
  latency: { ...EMPTY_SUMMARY, count: 10, p99Ms },
  stable: true,
  windows: 3,
  server: undefined,
  firstError: undefined,
});

describe('bestLevel', () => {
  it('takes the highest throughput within the P99 budget', () => {
    const levels = [level(100, 5), level(180, 9), level(240, 30)];
    expect(bestLevel(levels, 10)?.throughput).toBe(180);
    expect(bestLevel(levels, undefined)?.throughput).toBe(240);
    expect(bestLevel(levels, 1)).toBeUndefined();
    // A level that dropped requests cannot be recommended, however fast.
    expect(bestLevel([...levels, { ...level(900, 2), errors: 3 }], 10)?.throughput).toBe(180);
  });
});

const { run } = await checkEngine('OnnxRuntime', probeOrt);

describe.skipIf(!run)('--tune on a real ONNX model', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-bench-tune-'));
    await mlpModel(path.join(dir, 'mlp'), { inputSize: 32, hidden: [64], outputSize: 4 });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('tries splits, then batch sizes, then delays, and recommends serving.properties', async () => {
    const result = await runTune({
      url: path.join(dir, 'mlp'),
      latencyBudgetMs: 1000,
      workers: [1],
      batchSizes: [1, 4],
      delaysMs: [1, 5],
      windowMs: 120,
      maxWindows: 3,
    });
    expect(result.model).toBe('mlp');
    expect(result.inputs).toBe('(1,32)f');
    // One split without batching, batch 4 at the first delay (closed loop); then, only if
    // batch 4 won, each delay at a fixed rate (open loop).
    // The pinning step (where Kiln declares cpu_pinning) adds candidates with a setting.
    const swept = result.candidates.filter((c) => c.setting === undefined);
    const tried = swept.map((c) => `${c.batchSize}/${c.maxBatchDelayMs}/${c.load}`);
    expect(tried.slice(0, 2)).toEqual(['1/0/concurrency', '4/1/concurrency']);
    const batched =
      result.candidates[1]!.best !== undefined &&
      result.candidates[1]!.best.throughput > result.candidates[0]!.best!.throughput * 1.05;
    expect(tried.slice(2)).toEqual(batched ? ['4/1/rate', '4/5/rate'] : []);
    for (const c of result.candidates.filter((c) => c.load === 'concurrency')) {
      expect(c.levels.map((l) => l.level)).toEqual([
        c.workers * c.batchSize,
        c.workers * c.batchSize * 2,
      ]);
      expect(c.levels.every((l) => l.requests > 0)).toBe(true);
    }
    for (const c of result.candidates.filter((c) => c.load === 'rate')) {
      // Offered half of what batch 4 sustained in the closed loop.
      expect(c.levels).toHaveLength(1);
      expect(c.levels[0]!.level).toBeCloseTo(result.candidates[1]!.best!.throughput * 0.5, 0);
    }
    const recommended = result.recommended!;
    expect(recommended.best!.latency.p99Ms).toBeLessThanOrEqual(1000);
    if (recommended.load === 'concurrency') {
      // Nothing tried in the closed loop beat it by more than noise.
      const top = Math.max(
        ...swept.filter((c) => c.load === 'concurrency').map((c) => c.best?.throughput ?? 0),
      );
      expect(recommended.best!.throughput * 1.05).toBeGreaterThanOrEqual(top);
    }
    const declared = (key: string) => SERVING_SETTINGS.some((d) => d.key === key);
    expect(result.properties).toEqual({
      batch_size: String(recommended.batchSize),
      max_batch_delay: String(recommended.maxBatchDelayMs),
      minWorkers: '1',
      maxWorkers: '1',
      'option.intraOpNumThreads': String(recommended.threads),
      // The MLP has no dynamic axis but the batch: no batchifier keys.
      ...(declared('warmup_batch_sizes')
        ? { warmup_batch_sizes: [...new Set([1, recommended.batchSize])].join(',') }
        : {}),
      ...(declared('cpu_pinning') && process.platform === 'linux'
        ? { cpu_pinning: expect.stringMatching(/^(true|false)$/) }
        : {}),
    });
    expect(servingPropertiesText(result)).toMatch(
      /^# kiln-bench --tune for mlp[\s\S]*\nbatch_size=\d+\n/,
    );
  });
});

const python = await checkEngine('Python', async () => {
  const { execFileSync } = await import('node:child_process');
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import numpy'], { stdio: 'ignore' });
  } catch {
    return '/usr/bin/python3 cannot import numpy (apt-get install python3-numpy)';
  }
  try {
    findAllocatorLibrary('jemalloc');
    return null;
  } catch (error) {
    return (error as Error).message;
  }
});

describe.skipIf(!python.run)('--tune on a Python-mode model', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-bench-tune-python-'));
    await mkdir(path.join(dir, 'alloc'));
    // Allocates like pre- and post-processing: arrays of varying size every call.
    await writeFile(
      path.join(dir, 'alloc', 'model.py'),
      [
        'import numpy as np',
        'from djl_python import Output',
        'def handle(inputs):',
        '    if inputs.is_empty():',
        '        return None',
        '    n = inputs.get_as_json()["n"]',
        '    parts = [np.ones(1000 + 997 * i % 50000, dtype=np.float32) for i in range(n)]',
        '    return Output().add_as_json({"sum": float(sum(p.sum() for p in parts))})',
        '',
      ].join('\n'),
    );
    await writeFile(
      path.join(dir, 'alloc', 'serving.properties'),
      'option.pythonExecutable=/usr/bin/python3\n',
    );
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('measures its workers with jemalloc against glibc and writes option.allocator', async () => {
    const result = await runTune({
      url: `alloc::Python=${path.join(dir, 'alloc')}`,
      inputFile: {
        body: new TextEncoder().encode('{"n": 40}'),
        contentType: 'application/json',
        name: 'alloc.json',
      },
      latencyBudgetMs: 5000,
      workers: [1],
      batchSizes: [1],
      delaysMs: [1],
      windowMs: 150,
      maxWindows: 2,
    });
    expect(result.engine).toBe('Python');
    const settings = result.candidates.map((c) => c.setting).filter(Boolean);
    expect(settings).toEqual(
      expect.arrayContaining(['option.allocator=default', 'option.allocator=jemalloc']),
    );
    for (const c of result.candidates.filter((c) => c.setting?.startsWith('option.allocator')))
      expect(c.levels.every((l) => l.requests > 0 && l.errors === 0)).toBe(true);
    expect(result.properties['option.allocator']).toMatch(/^(jemalloc|default)$/);
  });
});
