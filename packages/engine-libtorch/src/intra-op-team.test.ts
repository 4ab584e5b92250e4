import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineRegistry, NDList } from '@kiln/core';
import { checkEngine, threadStatusField } from '@kiln/testing';
import { probeLibTorch } from './probe.js';
import { provider } from './provider.js';
import { ptOps } from './pt-ops.js';
import type { PtModel } from './pt-model.js';
import { loadFolder, modelFolder, randomTensor } from './test-support/models.js';

const availability = await checkEngine('PyTorch', probeLibTorch);

/** How often this process's threads have gone to sleep. */
function voluntarySwitches(): number {
  let total = 0;
  for (const count of threadStatusField('voluntary_ctxt_switches').values()) total += Number(count);
  return total;
}

/**
 * Freezing folds `tanh(weight * 2)` while the model loads: a parallel region on the loading
 * thread. Each forward then runs 60 more, one per op on 262,144 elements.
 */
const REGIONS_PER_FORWARD = 60;
const foldedSpec = {
  source: `
def forward(self, x: Tensor) -> Tensor:
    w = torch.tanh(self.weight * 2.0)
    for _ in range(30):
        x = torch.tanh(x * w)
    return x
`,
  parameters: { weight: randomTensor([512, 512], 7) },
};

const threads = Math.min(os.availableParallelism(), 4);

describe.skipIf(!availability.run || process.platform !== 'linux' || threads < 2)(
  'PyTorch intra-op team',
  () => {
    let root: string;
    let model: PtModel;

    beforeAll(async () => {
      root = mkdtempSync(join(tmpdir(), 'kiln-pt-team-'));
      const registry = new EngineRegistry({});
      registry.register(provider);
      const engine = await registry.get('PyTorch');
      model = (await loadFolder(
        engine,
        await modelFolder(root, 'folded', foldedSpec),
        {},
      )) as PtModel;
    });
    afterAll(async () => {
      await model.dispose();
      rmSync(root, { recursive: true, force: true });
    });

    // libgomp lets a team's threads spin between parallel regions only while all the OpenMP
    // threads of the process fit the cores. A team left behind by loading would make the
    // forward's teammates sleep and wake at every region instead.
    it('keeps the forward’s teammates awake after a load and tensor operations', async () => {
      const context = await model.newExecutionContext({ intraOpThreads: threads });
      const input = NDList.of(randomTensor([512, 512], 8, 'x'));
      // Operations for translators run on libuv's threads, as many at once as there are.
      await Promise.all(
        Array.from({ length: 4 }, (_, i) => ptOps.softmax(randomTensor([512, 512], 9 + i))),
      );
      for (let i = 0; i < 3; i++) await context.forward(input);

      // The quietest of a few samples: on a busy machine a teammate also sleeps when its
      // team's first thread loses its core for longer than the team spins.
      const perForward: number[] = [];
      for (let sample = 0; sample < 4; sample++) {
        const before = voluntarySwitches();
        for (let i = 0; i < 8; i++) await context.forward(input);
        perForward.push((voluntarySwitches() - before) / 8);
      }

      // Spinning teammates: a few sleeps a forward (the JavaScript thread, the libuv and
      // forward threads handing the call on). Sleeping ones: one or more a region.
      expect(Math.min(...perForward)).toBeLessThan(REGIONS_PER_FORWARD / 4);
      await context.close();
    });
  },
);
