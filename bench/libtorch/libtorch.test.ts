import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeLibTorch, saveScriptModule } from '@kiln/engine-libtorch';
import { checkEngine } from '@kiln/testing';
import { PYTHON, Runner, median, memory } from './contenders.js';

const availability = await checkEngine('PyTorch', probeLibTorch);
const pythonTorch = (() => {
  try {
    execFileSync(PYTHON, ['-c', 'import torch'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// The benchmark's processes on a model that takes the same input as ResNet-18 but does
// almost nothing, so the test checks the measuring path in seconds.
describe.skipIf(!availability.run)('bench/libtorch runners', () => {
  let dir: string;
  const spec = () => ({ modelDir: dir, threads: 1, batch: 2 });
  const times = async (contender: 'kiln' | 'python') => {
    const runner = await Runner.start(contender, spec());
    try {
      return [await runner.forwards(3), await runner.forwards(2)];
    } finally {
      await runner.close();
    }
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kiln-bench-libtorch-test-'));
    await saveScriptModule(join(dir, 'model.pt'), {
      source: 'def forward(self, x: Tensor) -> Tensor:\n    return x.mean(dim=[2, 3])\n',
    });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('times segments of Kiln forwards in a process of its own', async () => {
    const [first, second] = await times('kiln');
    expect(first).toHaveLength(3);
    expect(second).toHaveLength(2);
    expect([...first!, ...second!].every((t) => t > 0)).toBe(true);
  });

  it.skipIf(!pythonTorch)('times the Python loop on the same module', async () => {
    const [first] = await times('python');
    expect(first).toHaveLength(3);
  });

  it('reports the memory of shared and separately loaded predictors', async () => {
    const result = await memory(dir, 'shared', 2, 1);
    expect(result.peakMiB).toBeGreaterThanOrEqual(result.rssMiB * 0.5);
    expect(result.rssMiB).toBeGreaterThan(10);
  });

  it('takes medians', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });
});
