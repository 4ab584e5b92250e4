import { cp, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NDList, Tensor } from '@kiln/core';
import { type ResnetModel, resnetModel } from '@kiln/model-tools';
import { loadSharedFileAddon } from '@kiln/shared-file-native';
import { checkEngine, collectGarbage, residentBytes } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeOrt } from './probe.js';
import { loadOrtModel } from './test-support/load.js';

const ort = await checkEngine('OnnxRuntime', probeOrt);
const addon = loadSharedFileAddon();

// Without the addon (no compiler where it was installed) sessions keep private copies; CI builds it.
const addonMissing = addon.problem !== undefined && !process.env.CI;
if (addonMissing) console.warn(`[kiln] skipping shared-weight tests: ${addon.problem}`);

describe.skipIf(!ort.run || addonMissing)('shared weights', () => {
  let root: string;
  let resnet: ResnetModel;
  const input = new NDList([
    new Tensor(
      'float32',
      Float32Array.from({ length: 3 * 224 * 224 }, (_, i) => Math.sin(i)),
      [1, 3, 224, 224],
    ),
  ]);

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'kiln-ort-shared-'));
    resnet = await resnetModel(join(root, 'resnet18'), { depth: 18, classes: 10 });
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  /** Options keeping optimized models in this test's own folder. */
  const cache = (folder = 'cache') => ({ optimizedModelCache: join(root, folder) });
  const entries = async (folder = 'cache') => (await readdir(join(root, folder))).sort();

  it('gives every context of a model one copy of its weights, computing what a private copy computes', async () => {
    // `all`: every session reads the mapping, the first one too.
    const shared = await loadOrtModel(resnet.dir, {
      intraOpNumThreads: '1',
      shareWeights: 'all',
      ...cache(),
    });
    const own = await loadOrtModel(resnet.dir, {
      intraOpNumThreads: '1',
      shareWeights: 'false',
    });
    expect(shared.describe().weights).toEqual({
      shared: true,
      bytes: expect.any(Number),
      cache: 'stored',
    });
    expect((shared.describe().weights as { bytes: number }).bytes).toBeGreaterThan(40e6);
    expect(own.describe().weights).toEqual({ shared: false, reason: 'option.shareWeights=false' });

    // Garbage is collected before every reading: a collection in between would hide growth.
    const settledRss = async () => {
      await collectGarbage();
      return residentBytes();
    };
    const before = await settledRss();
    const contexts = await Promise.all([0, 1, 2, 3].map(() => shared.newExecutionContext()));
    const afterShared = await settledRss();
    expect(addon.addon!.stats().mappings).toBe(1);
    const ownContexts = await Promise.all([0, 1, 2, 3].map(() => own.newExecutionContext()));
    const ownGrowth = (await settledRss()) - afterShared;
    const sharedGrowth = afterShared - before;
    // ResNet-18 holds ~45 MB of weights. Four contexts of each model: the first takes over the
    // session made at load, three make new ones. Three private copies add at least two (171–207
    // MiB here; the allocator may first reuse what loading the model file freed); the shared
    // contexts add less than one.
    expect(ownGrowth).toBeGreaterThan(2 * 45e6);
    expect(sharedGrowth).toBeLessThan(45e6);
    console.log(
      `[kiln] RSS growth: 4 shared contexts ${sharedGrowth >> 20} MiB, 4 private ${ownGrowth >> 20} MiB`,
    );

    const expected = (await ownContexts[0]!.forward(input)).get(0).data as Float32Array;
    for (const context of contexts) {
      const answer = (await context.forward(input)).get(0).data as Float32Array;
      expect(Array.from(answer)).toEqual(Array.from(expected));
    }
    await shared.dispose();
    await own.dispose();
  });

  it('lets the first session of a model keep a pre-packed copy of its own; the others share', async () => {
    const model = await loadOrtModel(resnet.dir, { intraOpNumThreads: '1', ...cache() });
    // The session made at load is the process's first: its own copy, which ORT pre-packs.
    expect(model.describe().weights).toMatchObject({
      shared: true,
      bytes: expect.any(Number),
      ownCopy: true,
    });
    const first = await model.newExecutionContext();
    const [second, third] = await Promise.all([
      model.newExecutionContext(),
      model.newExecutionContext(),
    ]);
    expect(first.weights).toMatchObject({ shared: true, ownCopy: true });
    for (const other of [second, third]) {
      expect(other.weights).toMatchObject({ shared: true });
      expect(other.weights).not.toHaveProperty('ownCopy');
    }
    expect(addon.addon!.stats().mappings).toBe(1);
    const expected = Array.from((await first.forward(input)).get(0).data as Float32Array);
    expect(Array.from((await second.forward(input)).get(0).data as Float32Array)).toEqual(expected);
    // Once the owner is gone, the next session made owns a copy again.
    await first.close();
    const next = await model.newExecutionContext();
    expect(next.weights).toMatchObject({ ownCopy: true });
    await model.dispose();
  });

  it('maps the model again once it changed on disk, and unmaps what no session holds', async () => {
    const first = await loadOrtModel(resnet.dir, { shareWeights: 'all', ...cache() });
    await utimes(join(resnet.dir, 'model.onnx'), new Date(), new Date(Date.now() + 5000));
    const second = await loadOrtModel(resnet.dir, { shareWeights: 'all', ...cache() });
    expect(addon.addon!.stats().mappings).toBe(2);
    await first.dispose();
    await second.dispose();
    await collectGarbage();
    expect(addon.addon!.stats().mappings).toBe(0);
  });

  it('keeps the optimized model across restarts, one entry per model file', async () => {
    const folder = 'restarts';
    const first = await loadOrtModel(resnet.dir, cache(folder));
    expect(first.describe().weights).toMatchObject({ shared: true, cache: 'stored' });
    const [json, ort] = await entries(folder);
    expect(ort).toMatch(/^[0-9a-f]{16}-[0-9a-f]{32}\.ort$/);
    expect(json).toBe(ort!.replace(/\.ort$/, '.json'));
    await first.dispose();
    await collectGarbage();

    // As after a restart: no mapping alive, the entry opened without optimizing.
    const again = await loadOrtModel(resnet.dir, cache(folder));
    expect(again.describe().weights).toMatchObject({ shared: true, cache: 'hit' });
    await again.dispose();
    await collectGarbage();

    // A file some process left half-written an hour ago goes at the next store; a fresh one stays.
    const abandoned = join(root, folder, '.abandoned.123.partial');
    const fresh = join(root, folder, '.fresh.456.partial');
    await writeFile(abandoned, 'half');
    await writeFile(fresh, 'half');
    const hourAgo = new Date(Date.now() - 3_700_000);
    await utimes(abandoned, hourAgo, hourAgo);

    // A new version of the file replaces its entry; the entry of a model that is gone goes.
    const other = join(root, 'other');
    await cp(resnet.dir, other, { recursive: true });
    await (await loadOrtModel(other, cache(folder))).dispose();
    expect((await entries(folder)).filter((name) => !name.startsWith('.'))).toHaveLength(4);
    await rm(other, { recursive: true });
    await utimes(join(resnet.dir, 'model.onnx'), new Date(), new Date(Date.now() + 10_000));
    const changed = await loadOrtModel(resnet.dir, cache(folder));
    expect(changed.describe().weights).toMatchObject({ cache: 'stored' });
    const now = (await entries(folder)).filter((name) => !name.startsWith('.'));
    expect(now).toHaveLength(2);
    expect(now).not.toContain(ort);
    expect(await entries(folder)).toContain('.fresh.456.partial');
    expect(await entries(folder)).not.toContain('.abandoned.123.partial');
    await changed.dispose();
    await collectGarbage();
  });

  it('opens a damaged cache entry as a private copy and optimizes again next time', async () => {
    const folder = 'damaged';
    await (await loadOrtModel(resnet.dir, cache(folder))).dispose();
    await collectGarbage();
    const ort = (await entries(folder)).find((name) => name.endsWith('.ort'))!;
    await writeFile(join(root, folder, ort), 'not a model');
    const damaged = await loadOrtModel(resnet.dir, cache(folder));
    expect(damaged.describe().weights).toMatchObject({
      shared: false,
      reason: expect.stringContaining('opening the shared model'),
    });
    expect(await entries(folder)).toEqual([]); // the entry and its source note are gone
    const answer = await (await damaged.newExecutionContext()).forward(input);
    expect(answer.get(0).shape).toEqual([1, 10]);
    await damaged.dispose();
    await collectGarbage();
    const mended = await loadOrtModel(resnet.dir, cache(folder));
    expect(mended.describe().weights).toMatchObject({ shared: true, cache: 'stored' });
    await mended.dispose();
    await collectGarbage();
  });

  it('shares for the process alone where the cache folder cannot be written, or is off', async () => {
    await writeFile(join(root, 'a-file'), '');
    const unwritable = await loadOrtModel(resnet.dir, {
      optimizedModelCache: join(root, 'a-file', 'cache'),
    });
    expect(unwritable.describe().weights).toMatchObject({
      shared: true,
      cache: expect.stringMatching(/^not stored: /),
    });
    await unwritable.dispose();
    await collectGarbage();
    const off = await loadOrtModel(resnet.dir, { optimizedModelCache: 'false' });
    expect(off.describe().weights).toMatchObject({ shared: true, cache: 'off' });
    await off.dispose();
  });
});
