import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Engine, EngineRegistry } from '@kiln/core';
import { checkEngine, threadStatusField } from '@kiln/testing';
import type { HostTensor } from '@kiln/libtorch-native';
import { probeLibTorch } from './probe.js';
import { provider } from './provider.js';
import type { PtModel } from './pt-model.js';
import { convSpec, loadFolder, modelFolder, randomTensor } from './test-support/models.js';

const availability = await checkEngine('PyTorch', probeLibTorch);

/** The cores each of this process's threads may run on. */
const threadMasks = () => [...threadStatusField('Cpus_allowed_list').values()];

const image = () => randomTensor([1, 3, 32, 32], 5, 'x');

describe.skipIf(!availability.run || process.platform !== 'linux' || os.availableParallelism() < 2)(
  'PyTorch core pinning',
  () => {
    let engine: Engine;
    let root: string;
    let model: PtModel;
    const last = os.availableParallelism() - 1;

    beforeAll(async () => {
      root = mkdtempSync(join(tmpdir(), 'kiln-pt-pinning-'));
      const registry = new EngineRegistry({});
      registry.register(provider);
      engine = await registry.get('PyTorch');
      model = (await loadFolder(
        engine,
        await modelFolder(root, 'conv', convSpec()),
        {},
      )) as PtModel;
    });
    afterAll(async () => {
      await model.dispose();
      rmSync(root, { recursive: true, force: true });
    });

    it('runs each context’s forward thread on its own core, answering as unpinned', async () => {
      const first = await model.newExecutionContext({ intraOpThreads: 1, cpuCores: [0] });
      const second = await model.newExecutionContext({ intraOpThreads: 1, cpuCores: [last] });
      const plain = await model.newExecutionContext({ intraOpThreads: 1 });
      expect(first.pinnedCores).toEqual([0]);
      expect(plain.pinnedCores).toBeUndefined();
      const a = await first.forwardValues([image()]);
      const b = await second.forwardValues([image()]);
      const c = await plain.forwardValues([image()]);
      expect(a.observed.cpuAffinity).toEqual([0]);
      expect(b.observed.cpuAffinity).toEqual([last]);
      expect(c.observed.cpuAffinity.length).toBeGreaterThanOrEqual(2);
      // The kernel agrees: a thread of this process may run on `last` alone.
      expect(threadMasks()).toContain(String(last));
      const out = (r: typeof a) => [...((r.value as HostTensor).data as Float32Array)];
      expect(out(a)).toEqual(out(c));
      expect(out(b)).toEqual(out(c));
      await Promise.all([first.close(), second.close(), plain.close()]);
    });

    it('spreads a context’s intra-op threads over its cores, one each', async () => {
      const context = await model.newExecutionContext({ intraOpThreads: 2, cpuCores: [0, last] });
      const result = await context.forwardValues([image()]);
      // The forward's thread is the team's first: it keeps the first core.
      expect(result.observed.cpuAffinity).toEqual([0]);
      expect(result.observed.numThreads).toBe(2);
      const masks = threadMasks();
      // Its second OpenMP thread, started by the forward's thread, runs on the second core.
      expect(masks.filter((m) => m === String(last)).length).toBeGreaterThanOrEqual(1);
      await context.close();
    });
  },
);
