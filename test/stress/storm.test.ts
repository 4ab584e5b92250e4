// The bounded storm CI runs: a few thousand generated hostile requests against `kiln serve`.
// The full one is `npm run stress -- --requests 20000`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Target } from './hostile-cases.js';
import type { ServerProcess } from './server-process.js';
import { runStorm } from './storm.js';
import { startStormServer } from './storm-setup.js';

let server: ServerProcess;
let target: Target;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ server, target, cleanup } = await startStormServer());
});

afterAll(async () => {
  await cleanup?.();
});

describe('hostile-input storm (bounded)', () => {
  it('survives 3,000 hostile requests: no crash, hang, 5xx or non-JSON error, valid answers right', async () => {
    const report = await runStorm(server, target, {
      requests: 3000,
      concurrency: 8,
      seed: 12,
      checkEvery: 250,
      hangMs: 10_000,
      warmup: 1000,
    });
    expect(report.samples).toEqual([]);
    expect(report).toMatchObject({
      requests: 3000,
      crashes: 0,
      hangs: 0,
      unexpected5xx: 0,
      nonJson: 0,
      validWrong: 0,
    });
    expect(report.validChecks).toBe(12);
    expect(report.rssAfter - report.rssBefore).toBeLessThan(64 * 1024 * 1024);
  }, 240_000);
});
