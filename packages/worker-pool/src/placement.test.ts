import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { threadId } from 'node:worker_threads';
import { NDList, Tensor } from '@kiln/core';
import { probeOrt } from '@kiln/engine-onnxruntime';
import { tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import { resolveWorkerPoolSettings, workerPoolSettingsFromProperties } from './settings.js';
import { parseServingProperties } from '@kiln/core';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

const ENGINES = ['@kiln/engine-onnxruntime'];
const x = () => NDList.of(new Tensor('float32', Float32Array.of(1, -2, 3, -4), [1, 4], 'x'));

describe.skipIf(!run)('where a blocking engine runs (placement)', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-placement-'));
    await tinyModel(dir); // relu(x + bias), bias = [-1, 0, 1, 2]
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('runs one worker on the calling thread with placement inline, answering as on threads', async () => {
    const pool = await createWorkerPool({
      model: { url: dir, engines: ENGINES },
      settings: { placement: 'inline', minWorkers: 1, maxWorkers: 4 },
    });
    try {
      const description = pool.describe();
      expect(description.placement).toEqual({ kind: 'inline', reason: 'placement=inline' });
      const workers = description.workerGroups[0]!.workers;
      expect(workers).toHaveLength(1);
      expect(workers[0]).toMatchObject({ kind: 'inline', threadId: undefined, intraOpThreads: 1 });
      expect(description.workerGroups[0]).toMatchObject({ maxWorkers: 1 });
      // More workers would only take turns on this thread.
      await expect(pool.scale({ maxWorkers: 3 })).rejects.toMatchObject({
        code: 'INVALID_CONFIG',
        message: expect.stringContaining('load it with placement=thread to run more'),
      });
      await pool.scale({ minWorkers: 0, maxWorkers: 1 });
      const output = await pool.predict({ tensors: x() });
      if (output.type !== 'tensors') throw new Error(`expected tensors, got ${output.type}`);
      expect(Array.from(output.tensors.get('y').data as Float32Array)).toEqual([0, 0, 4, 0]);
    } finally {
      await pool.shutdown();
    }
  });

  it('moves a model to the calling thread when its timed batch is within the limit (auto)', async () => {
    const pool = await createWorkerPool({
      model: { url: dir, engines: ENGINES },
      settings: { minWorkers: 1, autoBatchSize: 8, inlineForwardLimitUs: 10_000_000 },
    });
    try {
      const { placement, workerGroups } = pool.describe();
      expect(placement.kind).toBe('inline');
      // The probe timed the batch the pool will run: the adaptive size, the model has a batch axis.
      expect(placement.probe).toMatchObject({
        batch: 8,
        bestUs: expect.any(Number),
        medianUs: expect.any(Number),
      });
      expect(placement.reason).toMatch(
        /a batch of 8 took \d+ µs at best \(median \d+ µs\) on a thread/,
      );
      expect(workerGroups[0]!.workers.map((w) => w.kind)).toEqual(['inline']);
      await expect(pool.predict({ tensors: x() })).resolves.toMatchObject({ type: 'tensors' });
    } finally {
      await pool.shutdown();
    }
  });

  it('keeps a model on threads when its timed batch is over the limit (auto)', async () => {
    const pool = await createWorkerPool({
      model: { url: dir, engines: ENGINES },
      settings: { minWorkers: 1, maxWorkers: 1, inlineForwardLimitUs: 0 },
    });
    try {
      const { placement, workerGroups } = pool.describe();
      expect(placement.kind).toBe('thread');
      expect(placement.reason).toMatch(/took \d+ µs at best .* on a thread \(inline limit 0 µs\)/);
      const worker = workerGroups[0]!.workers[0]!;
      expect(worker.kind).toBe('thread');
      expect(worker.threadId).not.toBe(threadId);
      await expect(pool.predict({ tensors: x() })).resolves.toMatchObject({ type: 'tensors' });
    } finally {
      await pool.shutdown();
    }
  });

  it('never times or moves a model with placement thread', async () => {
    const pool = await createWorkerPool({
      model: { url: dir, engines: ENGINES },
      settings: { minWorkers: 1, maxWorkers: 1, placement: 'thread' },
    });
    try {
      expect(pool.describe().placement).toEqual({ kind: 'thread', reason: 'placement=thread' });
      expect(pool.forwardProbe()).toBeUndefined();
    } finally {
      await pool.shutdown();
    }
  });

  it('refuses inline placement where a model cannot run on this thread', async () => {
    await expect(
      createWorkerPool({
        model: { url: dir, engines: ENGINES },
        devices: ['gpu0'],
        settings: { placement: 'inline' },
      }),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('only models on the cpu run inline'),
    });
  });
});

describe('placement settings', () => {
  it('defaults to auto with a 400 µs limit and refuses unknown placements', () => {
    expect(resolveWorkerPoolSettings()).toMatchObject({
      placement: 'auto',
      inlineForwardLimitUs: 400,
    });
    expect(() => resolveWorkerPoolSettings({ placement: 'gpu' as never })).toThrow(
      /placement must be one of auto, thread, inline/,
    );
  });

  it('reads placement and inline_forward_limit_us from serving.properties', () => {
    const properties = parseServingProperties('placement=inline\ninline_forward_limit_us=400\n');
    expect(workerPoolSettingsFromProperties(properties)).toMatchObject({
      placement: 'inline',
      inlineForwardLimitUs: 400,
    });
    expect(() =>
      workerPoolSettingsFromProperties(parseServingProperties('placement=threads\n')),
    ).toThrow(/serving.properties placement must be one of/);
  });
});
