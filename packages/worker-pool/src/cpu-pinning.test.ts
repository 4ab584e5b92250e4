import { describe, expect, it } from 'vitest';
import { allowedCores, pinCurrentThread } from './cpu-pinning.js';

describe('pinCurrentThread', () => {
  it('refuses an invalid core list without touching the thread', () => {
    const before = process.platform === 'linux' ? allowedCores() : [];
    expect(pinCurrentThread([])).toMatchObject({ pinned: false });
    expect(pinCurrentThread([-1])).toMatchObject({ pinned: false });
    if (process.platform === 'linux') expect(allowedCores()).toEqual(before);
  });

  it.skipIf(process.platform !== 'linux')('reads the cores this thread may run on', () => {
    const cores = allowedCores();
    expect(cores.length).toBeGreaterThanOrEqual(1);
    for (const core of cores) expect(Number.isInteger(core)).toBe(true);
  });

  it.skipIf(process.platform === 'linux')('reports that pinning needs Linux', () => {
    expect(pinCurrentThread([0])).toMatchObject({
      pinned: false,
      reason: expect.stringMatching(/Linux/),
    });
  });
});
