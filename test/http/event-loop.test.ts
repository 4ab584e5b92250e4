import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSlowModel } from '../support/fixtures.js';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

let t: TestServer;
let root: string;
const RUN_MS = 400;

beforeAll(async () => {
  root = tempDir('event-loop');
  const slow = await buildSlowModel(
    path.join(root, 'slow'),
    RUN_MS,
    'minWorkers=1\nmaxWorkers=1\nbatch_size=1\n',
  );
  t = await startTestServer({ models: [`slow=${slow}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('inference never blocks the event loop', () => {
  it('answers /ping within milliseconds while a slow model runs', async () => {
    const body = JSON.stringify({
      inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
    });
    const started = performance.now();
    const inference = fetch(`${t.inference}/predictions/slow`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' },
    }).then(() => performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 30));
    const pings: number[] = [];
    let inferenceMs: number | undefined;
    void inference.then((ms) => (inferenceMs = ms));
    while (inferenceMs === undefined && pings.length < 200) {
      const t0 = performance.now();
      const response = await fetch(`${t.inference}/ping`);
      expect(response.status).toBe(200);
      pings.push(performance.now() - t0);
    }
    await inference;
    pings.sort((a, b) => a - b);
    const median = pings[Math.floor(pings.length / 2)]!;
    // Ratios, not absolute times: many pings fit inside one inference, each a small share of it.
    expect(pings.length).toBeGreaterThan(10);
    expect(median / inferenceMs!).toBeLessThan(0.05);
  });
});
