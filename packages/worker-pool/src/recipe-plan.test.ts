import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { engineCatalogFor, preloadEngineFor } from './recipe-plan.js';
import { SCALE_ENGINE_MODULE, writeScaleModel } from './test-fixtures/scale-model-folder.js';

const loads = () => (globalThis as { kilnScaleEngineLoads?: number }).kilnScaleEngineLoads ?? 0;

describe('preloadEngineFor', () => {
  const folders: string[] = [];
  afterAll(() => Promise.all(folders.map((dir) => rm(dir, { recursive: true, force: true }))));

  it("loads the folder's engine where a worker of its recipe looks for it", async () => {
    const dir = await writeScaleModel(2);
    folders.push(dir);
    const before = loads();
    await preloadEngineFor(dir, [SCALE_ENGINE_MODULE]);
    expect(loads()).toBe(before + 1);
    // The catalog a host thread opens for the recipe's engine modules: the same engine.
    const { registry } = await engineCatalogFor([SCALE_ENGINE_MODULE]);
    await registry.get('TestScale');
    await preloadEngineFor(dir, [SCALE_ENGINE_MODULE]);
    expect(loads()).toBe(before + 1);
  });

  it('loads nothing for a folder no engine recognizes', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-preload-'));
    folders.push(dir);
    await writeFile(path.join(dir, 'notes.txt'), 'not a model');
    const before = loads();
    await preloadEngineFor(dir, [SCALE_ENGINE_MODULE]);
    expect(loads()).toBe(before);
  });
});
