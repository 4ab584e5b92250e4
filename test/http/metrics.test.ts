import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModelStore } from '../support/fixtures.js';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

/** Whether Prometheus's promtool is here (Debian: apt-get install prometheus). */
function promtool(): boolean {
  const found = spawnSync('promtool', ['--version']).status === 0;
  if (!found)
    console.log(
      'skipping the promtool check: promtool is not installed (apt-get install prometheus)',
    );
  return found;
}

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('metrics');
  const store = await buildModelStore(path.join(root, 'store'));
  t = await startTestServer({ models: [`iris=${store.iris}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('GET /metrics', () => {
  it('exposes request counts, the latency split, batch sizes, queue depth, workers, load time and memory', async () => {
    for (let i = 0; i < 5; i++) {
      await fetch(`${t.inference}/predictions/iris`, {
        method: 'POST',
        body: '[5.1,3.5,1.4,0.2]',
        headers: { 'content-type': 'application/json' },
      });
    }
    await fetch(`${t.inference}/predictions/iris`, {
      method: 'POST',
      body: 'nope',
      headers: { 'content-type': 'application/json' },
    });
    const response = await fetch(`${t.metrics}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(text).toContain(
      'kiln_requests_total{api="inference",route="/predictions/:model",model="iris",status="200"} 5',
    );
    expect(text).toContain(
      'kiln_requests_total{api="inference",route="/predictions/:model",model="iris",status="400"} 1',
    );
    for (const stage of ['queue', 'preprocess', 'inference', 'postprocess']) {
      expect(
        Number(new RegExp(`kiln_${stage}_seconds_count\\{model="iris"\\} (\\d+)`).exec(text)?.[1]),
      ).toBeGreaterThanOrEqual(5);
    }
    expect(text).toMatch(/kiln_batch_size_bucket\{le="1",model="iris"\} \d+/);
    expect(text).toMatch(/kiln_queue_depth\{model="iris"\} 0/);
    expect(text).toMatch(/kiln_workers\{model="iris",state="idle"\} [1-9]/);
    expect(text).toMatch(/kiln_model_load_seconds\{model="iris"\} [\d.]+/);
    expect(text).toMatch(/kiln_process_resident_memory_bytes \d+/);
  });

  it.skipIf(!promtool())('passes promtool check metrics', async () => {
    const text = await (await fetch(`${t.metrics}/metrics`)).text();
    expect(text).toMatch(/kiln_nodejs_active_handles\{type="/);
    const check = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
  });

  it('is served on its own listener only', async () => {
    expect((await fetch(`${t.inference}/metrics`)).status).toBe(404);
  });
});
