// A small TF.js model through the worker pool: with the JavaScript backends it may run inline
// on the calling thread (no thread hop), and it answers the same wherever it runs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor } from '@kiln/core';
import { probeTensorFlow } from '@kiln/engine-tensorflow';
import { checkEngine, tfjsAffineModel } from '@kiln/testing';
import { createWorkerPool, type Placement } from '@kiln/worker-pool';

const availability = await checkEngine('TensorFlow', () => probeTensorFlow('wasm'));

describe.skipIf(!availability.run)('a TF.js model in the worker pool', () => {
  let dir: string;
  let expected: number[];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-tf-placement-'));
    const fixture = await tfjsAffineModel(dir);
    const x = [1, 2, 3, 4];
    expected = fixture.bias.map(
      (b, j) => b + x.reduce((sum, v, i) => sum + v * fixture.weights[i]![j]!, 0),
    );
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const cases: { placement: Placement; limit?: number; kind: 'thread' | 'inline' }[] = [
    { placement: 'thread', kind: 'thread' },
    { placement: 'inline', kind: 'inline' },
    { placement: 'auto', limit: 10_000_000, kind: 'inline' },
    { placement: 'auto', limit: 0, kind: 'thread' },
  ];
  for (const { placement, limit, kind } of cases) {
    it(`runs ${kind} with placement ${placement}${limit === undefined ? '' : ` (limit ${limit} µs)`}`, async () => {
      const pool = await createWorkerPool({
        model: { url: dir, engines: ['@kiln/engine-tensorflow'] },
        settings: {
          placement,
          minWorkers: 1,
          maxWorkers: 1,
          ...(limit === undefined ? {} : { inlineForwardLimitUs: limit }),
        },
      });
      try {
        const { placement: where, workerGroups } = pool.describe();
        expect(where.kind).toBe(kind);
        const worker = workerGroups[0]!.workers[0]!;
        expect(worker.kind).toBe(kind);
        if (kind === 'thread') expect(worker.threadId).not.toBe(threadId);
        const x = NDList.of(new Tensor('float32', Float32Array.of(1, 2, 3, 4), [1, 4], 'x'));
        const output = await pool.predict({ tensors: x, rawTensors: true });
        if (output.type !== 'tensors') throw new Error(`expected tensors, got ${output.type}`);
        const y = Array.from(output.tensors.get(0).data as Float32Array);
        y.forEach((v, j) => expect(v).toBeCloseTo(expected[j]!, 5));
      } finally {
        await pool.shutdown();
      }
    });
  }
});
