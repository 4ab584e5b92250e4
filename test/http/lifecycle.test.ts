import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModelStore, buildSlowModel, type ModelStore } from '../support/fixtures.js';
import {
  type TestServer,
  jsonOf,
  sleep,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let store: ModelStore;
let slow: string;
let root: string;
const slowBody = JSON.stringify({
  inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] }],
});

beforeAll(async () => {
  root = tempDir('lifecycle');
  store = await buildModelStore(path.join(root, 'store'));
  // One worker, batch 1, a queue of two: a burst must overflow it.
  slow = await buildSlowModel(
    path.join(root, 'slow'),
    150,
    'minWorkers=1\nmaxWorkers=1\njob_queue_size=2\nbatch_size=1\n',
  );
});

afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const predictSlow = (t: TestServer) =>
  fetch(`${t.inference}/predictions/slow`, {
    method: 'POST',
    body: slowBody,
    headers: { 'content-type': 'application/json' },
  });

describe('model lifecycle', () => {
  it('reports a model that fails to load as FAILED while the others serve', async () => {
    const broken = path.join(root, 'broken');
    fs.mkdirSync(broken, { recursive: true });
    fs.writeFileSync(path.join(broken, 'model.onnx'), 'not an onnx file');
    const t = await startTestServer({ models: [`iris=${store.iris}`, `broken=${broken}`] });
    try {
      await t.settled();
      const ping = await jsonOf(await fetch(`${t.inference}/ping`));
      expect(ping.status).toBe(500);
      expect(ping.body).toEqual({
        iris: { status: 'Healthy' },
        broken: { status: 'FAILED', error: expect.any(String) },
      });
      expect(JSON.stringify(ping.body)).not.toContain(root);
      expect((await fetch(`${t.inference}/v2/health/ready`)).status).toBe(503);
      const iris = await fetch(`${t.inference}/predictions/iris`, {
        method: 'POST',
        body: '[5.1,3.5,1.4,0.2]',
        headers: { 'content-type': 'application/json' },
      });
      expect(iris.status).toBe(200);
      const failed = await jsonOf(
        await fetch(`${t.inference}/predictions/broken`, { method: 'POST', body: '[1]' }),
      );
      expect(failed.status).toBe(500);
      expect((failed.body as { message: string }).message).toMatch(/broken/);
      const described = await jsonOf(await t.manage('/models/broken'));
      expect((described.body as { status: string; error: string }[])[0]).toMatchObject({
        status: 'FAILED',
        error: expect.any(String),
      });
    } finally {
      await t.stop();
    }
  });

  it('refuses a FAILED model on every inference route before reading the body', async () => {
    const t = await startTestServer({ models: [`x=${path.join(root, 'no-such-model')}`] });
    // 1000 bytes declared, 5 sent: the answer must come while the rest is still owed.
    const partly = (route: string) =>
      new Promise<number>((resolve, reject) => {
        const request = http.request(`${t.inference}${route}`, {
          method: 'POST',
          headers: { 'content-type': 'application/octet-stream', 'content-length': '1000' },
        });
        request.on('response', (response) => {
          response.resume();
          response.on('end', () => {
            resolve(response.statusCode!);
            request.destroy();
          });
        });
        request.on('error', reject);
        request.write('hello');
      });
    try {
      await t.settled();
      // The fast route, the Koa route (a query string takes it there) and v2 infer.
      expect(await partly('/predictions/x')).toBe(500);
      expect(await partly('/predictions/x?trace=1')).toBe(500);
      expect(await partly('/v2/models/x/infer')).toBe(500);
    } finally {
      await t.stop();
    }
  });

  it('keeps a model whose folder is missing as FAILED: /ping 500 with the reason, not ready', async () => {
    const missing = path.join(root, 'no-such-model');
    const t = await startTestServer({ models: [`x=${missing}`, `iris=${store.iris}`] });
    try {
      await t.settled();
      const ping = await jsonOf(await fetch(`${t.inference}/ping`));
      expect(ping.status).toBe(500);
      const x = (ping.body as Record<string, { status: string; error?: string }>).x!;
      expect(x.status).toBe('FAILED');
      expect(x.error).toMatch(/no-such-model/);
      expect(JSON.stringify(ping.body)).not.toContain(root);
      expect(ping.body).toMatchObject({ iris: { status: 'Healthy' } });
      const ready = await jsonOf(await fetch(`${t.inference}/v2/health/ready`));
      expect(ready).toMatchObject({ status: 503, body: { ready: false } });
      expect((await fetch(`${t.inference}/v2/models/x/ready`)).status).toBe(503);
      const predicted = await fetch(`${t.inference}/predictions/x`, {
        method: 'POST',
        body: '[1]',
      });
      expect(predicted.status).toBe(500);
      expect(await predicted.text()).not.toContain(root);
      const iris = await fetch(`${t.inference}/predictions/iris`, {
        method: 'POST',
        body: '[5.1,3.5,1.4,0.2]',
        headers: { 'content-type': 'application/json' },
      });
      expect(iris.status).toBe(200);
      // The operator can clear it: unregistered, the server is ready again.
      expect((await t.manage('/models/x', { method: 'DELETE' })).status).toBe(200);
      expect((await fetch(`${t.inference}/v2/health/ready`)).status).toBe(200);
      expect((await fetch(`${t.inference}/ping`)).status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  it('keeps a model whose serving.properties the server refuses as FAILED, with the reason', async () => {
    const greedy = path.join(root, 'greedy');
    fs.cpSync(store.iris, greedy, { recursive: true });
    fs.writeFileSync(path.join(greedy, 'serving.properties'), 'maxWorkers=9999\n');
    const t = await startTestServer({ models: [`greedy=${greedy}`] });
    try {
      await t.settled();
      const ping = await jsonOf(await fetch(`${t.inference}/ping`));
      expect(ping).toMatchObject({
        status: 500,
        body: { greedy: { status: 'FAILED', error: expect.stringMatching(/max_workers_limit/) } },
      });
      expect((await fetch(`${t.inference}/v2/health/ready`)).status).toBe(503);
    } finally {
      await t.stop();
    }
  });

  it('reports PENDING honestly while a model loads in the background', async () => {
    const t = await startTestServer({ models: [`iris=${store.iris}`] });
    try {
      for (let i = 0; i < 100 && t.server.models.list().length === 0; i++) await sleep(5);
      const early = await jsonOf(await fetch(`${t.inference}/ping`));
      if (t.server.models.get('iris').state === 'PENDING') {
        expect(early.status).toBe(503);
        expect(early.body).toEqual({ iris: { status: 'PENDING' } });
      }
      await t.settled();
      expect((await fetch(`${t.inference}/ping`)).status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  it('answers overload with 503 and Retry-After (or 429 when configured), never losing accepted requests', async () => {
    for (const overload of ['503', '429']) {
      const t = await startTestServer({
        models: [`slow=${slow}`],
        config: { overload_status: overload, retry_after: '3' },
      });
      try {
        await t.settled();
        const replies = await Promise.all(Array.from({ length: 10 }, () => predictSlow(t)));
        const statuses = replies.map((r) => r.status);
        const refused = replies.filter((r) => r.status === Number(overload));
        expect(refused.length).toBeGreaterThan(0);
        expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(2);
        expect(statuses.every((s) => s === 200 || s === Number(overload))).toBe(true);
        for (const r of refused) {
          expect(r.headers.get('retry-after')).toBe('3');
          expect(await r.json()).toMatchObject({ code: Number(overload), type: 'QueueFull' });
        }
      } finally {
        await t.stop();
      }
    }
  });

  it('drains accepted requests on stop and refuses new ones', async () => {
    const t = await startTestServer({ models: [`slow=${slow}`] });
    await t.settled();
    const inFlight = [predictSlow(t), predictSlow(t)];
    await sleep(50);
    const stopping = t.stop();
    const late = await jsonOf(await predictSlow(t));
    expect(late.status).toBe(503);
    expect(late.body).toMatchObject({ type: 'Closed' });
    const statuses = await Promise.all(inFlight.map((p) => p.then((r) => r.status)));
    await stopping;
    expect(statuses).toEqual([200, 200]);
  });
});

describe('clients that go away', () => {
  it('cancel their queued request, which then never runs', async () => {
    const t = await startTestServer({ models: [`slow=${slow}`] });
    try {
      await t.settled();
      const first = predictSlow(t);
      await sleep(30);
      const controller = new AbortController();
      const abandoned = fetch(`${t.inference}/predictions/slow`, {
        method: 'POST',
        body: slowBody,
        headers: { 'content-type': 'application/json' },
        signal: controller.signal,
      }).catch((error: unknown) => error);
      await sleep(30);
      controller.abort();
      await abandoned;
      expect((await first).status).toBe(200);
      const pool = t.server.models.get('slow').pool!;
      for (let i = 0; i < 100 && pool.stats().totals.cancelled === 0; i++) await sleep(10);
      expect(pool.stats().totals).toMatchObject({ cancelled: 1, succeeded: 1 });
    } finally {
      await t.stop();
    }
  });
});

describe('kiln serve -m with a missing folder', () => {
  it('reports the model FAILED and the server not ready, serving the others', async () => {
    const bin = fileURLToPath(new URL('../../apps/cli/bin/kiln.mjs', import.meta.url));
    const child = spawn(
      bin,
      [
        'serve',
        '-m',
        `x=${path.join(root, 'missing-folder')}`,
        '-m',
        `iris=${store.iris}`,
        '--inference-address',
        'http://127.0.0.1:0',
        '--management-address',
        'http://127.0.0.1:0',
        '--metrics-address',
        'http://127.0.0.1:0',
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, KILN_KEY_FILE: path.join(root, 'cli-key.json') },
      },
    );
    let output = '';
    child.stdout.on('data', (d) => (output += d.toString()));
    child.stderr.on('data', (d) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    try {
      for (let i = 0; i < 600 && !/model iris .*READY/.test(output); i++) await sleep(50);
      expect(output).toMatch(/model x .*FAILED/);
      const inference = /inference\s+(http:\/\/\S+)/.exec(output)![1]!;
      const ping = await jsonOf(await fetch(`${inference}/ping`));
      expect(ping.status).toBe(500);
      expect(ping.body).toMatchObject({
        x: { status: 'FAILED', error: expect.stringMatching(/missing-folder/) },
        iris: { status: 'Healthy' },
      });
      expect(JSON.stringify(ping.body)).not.toContain(root);
      expect((await fetch(`${inference}/v2/health/ready`)).status).toBe(503);
      const iris = await fetch(`${inference}/predictions/iris`, {
        method: 'POST',
        body: '[5.1,3.5,1.4,0.2]',
        headers: { 'content-type': 'application/json' },
      });
      expect(iris.status).toBe(200);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('kiln serve under SIGTERM', () => {
  it('stops accepting, drains in-flight requests, then exits 0', async () => {
    const bin = fileURLToPath(new URL('../../apps/cli/bin/kiln.mjs', import.meta.url));
    const child = spawn(
      bin,
      [
        'serve',
        '-m',
        `slow=${slow}`,
        '--inference-address',
        'http://127.0.0.1:0',
        '--management-address',
        'http://127.0.0.1:0',
        '--metrics-address',
        'http://127.0.0.1:0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (d) => (output += d.toString()));
    child.stderr.on('data', (d) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => resolve(code)),
    );
    try {
      for (let i = 0; i < 600 && !/READY|FAILED/.test(output); i++) await sleep(50);
      expect(output).toMatch(/model slow .*READY/);
      const inference = /inference\s+(http:\/\/\S+)/.exec(output)![1]!;
      const inFlight = fetch(`${inference}/predictions/slow`, {
        method: 'POST',
        body: slowBody,
        headers: { 'content-type': 'application/json' },
      });
      await sleep(40);
      child.kill('SIGTERM');
      expect((await inFlight).status).toBe(200);
      expect(await exited).toBe(0);
      expect(output).toMatch(/draining/);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
