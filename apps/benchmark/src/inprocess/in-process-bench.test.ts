import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadOrt } from '@kiln/engine-onnxruntime';
import { tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseShapes } from '../options/shapes.js';
import { STAGES } from '../results.js';
import { runInProcessBench } from './in-process-bench.js';

const { run } = await checkEngine('OnnxRuntime', async () => {
  await loadOrt();
  return null;
});

describe.skipIf(!run)('in-process benchmark of a real ONNX model', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-bench-inproc-'));
    await tinyModel(path.join(dir, 'tiny'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reports load, first inference, throughput and every stage for -c requests on -t workers', async () => {
    const result = await runInProcessBench({
      url: path.join(dir, 'tiny'),
      inputs: parseShapes('1,4'),
      iterations: 60,
      workers: 2,
      warmup: 4,
    });
    expect(result).toMatchObject({
      kind: 'in-process',
      model: 'tiny',
      engine: 'OnnxRuntime',
      workers: 2,
      concurrency: 2,
      iterations: 60,
      errors: 0,
      inputs: '(1,4)f',
    });
    expect(result.loadMs).toBeGreaterThan(0);
    expect(result.firstInferenceMs).toBeGreaterThan(0);
    expect(result.throughput).toBeGreaterThan(0);
    for (const stage of STAGES) expect(result.latency[stage].count).toBe(60);
    // Each request's total holds its inference, so every order statistic does too.
    expect(result.latency.total.p50Ms).toBeGreaterThanOrEqual(result.latency.inference.p50Ms);
    expect(result.latency.total.p99Ms).toBeGreaterThanOrEqual(result.latency.inference.p99Ms);
    expect(result.resources.rssPeakBytes).toBeGreaterThan(result.resources.rssEndBytes * 0.5);
    expect(result.resources.cpuPercent).toBeGreaterThan(0);
  });

  it('reads the shapes from the model when -s is left out, and runs for -d', async () => {
    const result = await runInProcessBench({
      url: path.join(dir, 'tiny'),
      iterations: 1,
      durationMs: 300,
      workers: 1,
      warmup: 0,
    });
    expect(result.inputs).toBe('(1,4)f');
    expect(result.elapsedMs).toBeGreaterThanOrEqual(300);
    expect(result.iterations).toBeGreaterThan(1);
  });

  it('fails on the first request when the shapes do not fit the model', async () => {
    await expect(
      runInProcessBench({
        url: path.join(dir, 'tiny'),
        inputs: parseShapes('1,5'),
        iterations: 5,
        workers: 1,
        warmup: 0,
      }),
    ).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
  });
});
