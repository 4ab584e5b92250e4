import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { NDList, type ServingInput, type ServingOutput, Tensor } from '@kiln/core';
import { probeOrt } from '@kiln/engine-onnxruntime';
import { tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import { type WorkerPool, hasBatchAxis } from './worker-pool.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

describe.skipIf(!run)('a pool over the real ONNX Runtime engine', () => {
  let dir: string;
  let pool: WorkerPool<ServingInput, ServingOutput>;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-pool-ort-'));
    await tinyModel(dir);
    pool = await createWorkerPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings: {
        cores: 2,
        minWorkers: 2,
        maxWorkers: 2,
        batchSize: 4,
        maxBatchDelayMs: 5,
        placement: 'thread',
      },
    });
  });
  afterAll(async () => {
    await pool?.shutdown();
    await rm(dir, { recursive: true, force: true });
  });

  it('runs a session on the own thread of each worker, one intra-op thread each on two cores', () => {
    const workers = pool.describe().workerGroups[0]!.workers;
    expect(workers).toHaveLength(2);
    const threads = new Set(workers.map((w) => w.threadId));
    expect(threads.size).toBe(2);
    expect(threads.has(threadId)).toBe(false);
    for (const worker of workers) {
      expect(worker).toMatchObject({ kind: 'thread', intraOpThreads: 1 });
      expect(worker.model).toMatchObject({ engine: 'OnnxRuntime', session: expect.any(Object) });
    }
  });

  it('ends ONNX Runtime profiling on the thread of each worker, through the pool', async () => {
    const profiled = await createWorkerPool({
      model: {
        url: dir,
        engines: ['@kiln/engine-onnxruntime'],
        overrides: { 'option.profiling': 'true' },
      },
      settings: { minWorkers: 1, maxWorkers: 1, maxBatchDelayMs: 0, placement: 'thread' },
    });
    try {
      const x = NDList.of(new Tensor('float32', Float32Array.of(1, 2, 3, 4), [1, 4], 'x'));
      for (let i = 0; i < 3; i++) await profiled.predict({ tensors: x });
      const [profile] = (await profiled.endProfiling({ skipRuns: 1 })) as {
        runs: number;
        nodes: unknown[];
      }[];
      // The run skipped is the worker's warm-up (batch size 1), before the three requests.
      expect(profile!.runs).toBe(3);
      await expect(profiled.endProfiling()).rejects.toMatchObject({
        message: expect.stringContaining('already ended'),
      });
    } finally {
      await profiled.shutdown();
    }
    // A model loaded without profiling says so.
    await expect(pool.endProfiling()).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  });

  it('answers each request with its own rows of relu(x + bias)', async () => {
    const bias = [-1, 0, 1, 2];
    const requests = Array.from({ length: 40 }, (_, i) => {
      const rows = 1 + (i % 3);
      const x = Array.from({ length: rows * 4 }, (_, k) => ((i * 7 + k) % 11) - 5);
      return { x, rows };
    });
    const outputs = await Promise.all(
      requests.map(({ x, rows }) =>
        pool.predict({
          tensors: NDList.of(new Tensor('float32', Float32Array.from(x), [rows, 4], 'x')),
        }),
      ),
    );
    outputs.forEach((output, i) => {
      const { x, rows } = requests[i]!;
      expect(output.type).toBe('tensors');
      if (output.type !== 'tensors') return;
      const y = output.tensors.get('y');
      expect(y.shape).toEqual([rows, 4]);
      expect(Array.from(y.data as Float32Array)).toEqual(
        x.map((v, k) => Math.max(0, v + bias[k % 4]!)),
      );
    });
    expect(pool.stats().totals.succeeded).toBe(40);
  });

  it('batches adaptively when nobody chose a batch size and every input has a batch axis', async () => {
    const adaptive = await createWorkerPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings: { minWorkers: 1, maxWorkers: 1, autoBatchSize: 8 },
    });
    try {
      expect(adaptive.describe()).toMatchObject({ batchSize: 8, maxBatchDelayMs: 0 });
      const sizes: number[] = [];
      adaptive.on('batch', (b) => sizes.push(b.batchSize));
      const x = NDList.of(new Tensor('float32', Float32Array.of(1, 2, 3, 4), [1, 4], 'x'));
      // Alone, a request runs at once; many waiting ones share runs.
      await adaptive.predict({ tensors: x });
      expect(sizes).toEqual([1]);
      await Promise.all(Array.from({ length: 40 }, () => adaptive.predict({ tensors: x })));
      expect(Math.max(...sizes)).toBeGreaterThan(1);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(8);
    } finally {
      await adaptive.shutdown();
    }
    expect(hasBatchAxis([{ name: 'x', dtype: 'float32', shape: [-1, 4] }])).toBe(true);
    expect(hasBatchAxis([{ name: 'x', dtype: 'float32', shape: [1, 4] }])).toBe(false);
    expect(hasBatchAxis([{ name: 'x' }])).toBe(false); // TorchScript: nothing declared
    expect(hasBatchAxis([])).toBe(false);
  });
});
