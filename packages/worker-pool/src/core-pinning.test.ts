import { rm } from 'node:fs/promises';
import os from 'node:os';
import { type ServingInput, type ServingOutput, servingPropertiesFrom } from '@kiln/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerPool } from './create-worker-pool.js';
import { type WorkerPoolSettingsInput, workerPoolSettingsFromProperties } from './settings.js';
import {
  JSON_TRANSLATOR_MODULE,
  SCALE_ENGINE_MODULE,
  writeScaleModel,
} from './test-fixtures/scale-model-folder.js';
import type { WorkerPool } from './worker-pool.js';

describe('serving.properties pinning keys', () => {
  it('reads cpu_pinning, cpu_pinning_logical_cores and cpu_pinning_node', () => {
    const settings = workerPoolSettingsFromProperties(
      servingPropertiesFrom({
        cpu_pinning: 'TRUE',
        cpu_pinning_logical_cores: 'false',
        cpu_pinning_node: '1',
      }),
    );
    expect(settings).toMatchObject({ pinCores: true, pinLogicalCores: false, pinNode: 1 });
    expect(workerPoolSettingsFromProperties(servingPropertiesFrom({}))).not.toHaveProperty(
      'pinCores',
    );
    expect(() =>
      workerPoolSettingsFromProperties(servingPropertiesFrom({ cpu_pinning: 'yes' })),
    ).toThrow(/cpu_pinning=yes must be true or false/);
  });
});

const pinnable = process.platform === 'linux' && os.availableParallelism() >= 2;

describe.skipIf(!pinnable)('a pool pinning its workers', () => {
  const pools: WorkerPool<ServingInput, ServingOutput>[] = [];
  let modelDir: string;
  beforeAll(async () => {
    modelDir = await writeScaleModel(2);
  });
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.shutdown({ timeoutMs: 5000 })));
  });
  afterAll(async () => {
    await rm(modelDir, { recursive: true, force: true });
  });

  const pool = async (settings: WorkerPoolSettingsInput) => {
    const created = await createWorkerPool({
      model: { url: modelDir, engines: [SCALE_ENGINE_MODULE], translator: JSON_TRANSLATOR_MODULE },
      settings: { placement: 'thread', pinCores: true, ...settings },
    });
    pools.push(created);
    return created;
  };

  it('gives each worker physical cores of its own, its thread budget their count', async () => {
    const cores = os.availableParallelism();
    const two = await pool({ minWorkers: 2, maxWorkers: 2 });
    const workers = two.describe().workerGroups[0]!.workers;
    const sets = workers.map((w) => w.pinnedCores!);
    // Disjoint, and as large as each other.
    expect(new Set(sets.flat()).size).toBe(sets.flat().length);
    expect(sets[0]!.length).toBe(sets[1]!.length);
    expect(workers.map((w) => w.intraOpThreads)).toEqual([sets[0]!.length, sets[0]!.length]);
    expect(two.corePlan()!.sets).toHaveLength(2);
    const one = await pool({ minWorkers: 1, maxWorkers: 1 });
    expect(one.describe().workerGroups[0]!.workers[0]!.pinnedCores!.length).toBeLessThanOrEqual(
      cores,
    );
  });

  it('splits the cores into --ninstances sets when asked', async () => {
    const split = await pool({ minWorkers: 1, maxWorkers: 1, pinInstances: 2 });
    const plan = split.corePlan()!;
    expect(plan.sets).toHaveLength(2);
    expect(split.describe().workerGroups[0]!.workers[0]!.pinnedCores).toEqual(plan.sets[0]);
  });

  it('refuses a NUMA node the machine does not have, naming the nodes it has', async () => {
    await expect(pool({ minWorkers: 1, maxWorkers: 1, pinNode: 64 })).rejects.toThrow(
      /NUMA node 64 does not exist: this machine has node/,
    );
  });
});
