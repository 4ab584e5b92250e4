import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { mlpModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { createWorkerPool } from '@kiln/worker-pool';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LoadResult, quantile, runLoad } from './load-test.js';
import { largestDifference, rowRequests } from './workload.js';

const availability = await checkEngine('OnnxRuntime', async () => {
  await createOnnxRuntimeEngine().load();
  return null;
});

describe('quantile', () => {
  it('picks the value below which the share of values lies', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(quantile(values, 0.5)).toBe(51);
    expect(quantile(values, 0.99)).toBe(100);
    expect(quantile([], 0.5)).toBeNaN();
  });
});

describe.runIf(availability.run)('batching bench on a real model', () => {
  let dir: string;
  const requests = rowRequests(240, 16, 5);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kiln-batching-bench-'));
    await mlpModel(dir, { inputSize: 16, hidden: [32], outputSize: 4 });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(batchSize: number): Promise<LoadResult> {
    const pool = await createWorkerPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings: {
        batchSize,
        maxBatchDelayMs: batchSize === 1 ? 0 : 5,
        minWorkers: 2,
        maxWorkers: 2,
      },
    });
    try {
      return await runLoad(pool, requests, 32);
    } finally {
      await pool.shutdown();
    }
  }

  it('answers every request the same with and without batching, in batches when allowed', async () => {
    const single = await serve(1);
    const batched = await serve(8);
    expect(single.outputs).toHaveLength(requests.length);
    expect(largestDifference(single.outputs, batched.outputs)).toBeLessThan(1e-5);
    expect(single.meanBatch).toBe(1);
    expect(batched.meanBatch).toBeGreaterThan(2);
    expect(batched.p99Ms).toBeGreaterThanOrEqual(batched.p50Ms);
  });
});
