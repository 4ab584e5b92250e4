import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, decodeTensors, encodeNpz } from '@kiln/core';
import { buildModelStore, type ModelStore } from '../support/fixtures.js';
import {
  type TestServer,
  capturingLogger,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

// POST /predictions/{model} is answered outside Koa; with a query string the same request goes
// through Koa's route (which ignores the query). Both must answer alike, byte for byte.

let store: ModelStore;
let t: TestServer;
let root: string;
const log = capturingLogger();
const logLines = log.lines;

beforeAll(async () => {
  root = tempDir('fast-predictions');
  store = await buildModelStore(path.join(root, 'store'));
  t = await startTestServer({
    models: [`iris=${store.iris}`, `addmul=${store.addMul}`],
    config: { enable_access_log: 'true', max_request_size: '4096' },
    logger: log.logger,
  });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const npz = Buffer.from(
  encodeNpz(
    NDList.of(
      new Tensor('float32', new Float32Array([1, 2, 3]), [1, 3], 'a'),
      new Tensor('float32', new Float32Array([4, 5, 6]), [1, 3], 'b'),
    ),
  ),
);

const cases: {
  name: string;
  route: string;
  body: Buffer | string;
  headers: Record<string, string>;
}[] = [
  {
    name: 'npz in, npz out',
    route: '/predictions/addmul',
    body: npz,
    headers: { 'content-type': 'tensor/npz', accept: 'tensor/npz' },
  },
  {
    name: 'npz in and out under numpy’s media type',
    route: '/predictions/addmul',
    body: npz,
    headers: { 'content-type': 'application/x-npz', accept: 'application/x-npz' },
  },
  {
    name: 'npz in, JSON tensors out',
    route: '/predictions/addmul',
    body: npz,
    headers: { 'content-type': 'tensor/npz' },
  },
  {
    name: 'a translator answering JSON',
    route: '/predictions/iris',
    body: '[6.7, 3.0, 5.2, 2.3]',
    headers: { 'content-type': 'application/json' },
  },
  {
    name: 'inputs of the wrong shape',
    route: '/predictions/addmul',
    body: '{"a": [1, 2]}',
    headers: { 'content-type': 'application/json' },
  },
  { name: 'an empty body', route: '/predictions/iris', body: '', headers: {} },
  {
    name: 'a body over max_request_size',
    route: '/predictions/iris',
    body: 'x'.repeat(5000),
    headers: {},
  },
  {
    name: 'bytes no decoder reads',
    route: '/predictions/addmul',
    body: '\u0093NUMPY garbage',
    headers: { 'content-type': 'application/x-npy' },
  },
  {
    name: 'a version that is not registered',
    route: '/predictions/addmul/7',
    body: npz,
    headers: { 'content-type': 'tensor/npz' },
  },
  { name: 'a model that is not registered', route: '/predictions/nobody', body: npz, headers: {} },
];

async function answer(route: string, body: Buffer | string, headers: Record<string, string>) {
  const response = await fetch(`${t.inference}${route}`, { method: 'POST', body, headers });
  return {
    status: response.status,
    type: response.headers.get('content-type'),
    length: response.headers.get('content-length'),
    connection: response.headers.get('connection'),
    retryAfter: response.headers.get('retry-after'),
    body: Buffer.from(await response.arrayBuffer()).toString('base64'),
  };
}

async function requestCount(route: string, model: string, status: number): Promise<number> {
  const text = await (await fetch(`${t.metrics}/metrics`)).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('kiln_requests_total{') &&
        l.includes(`route="${route}"`) &&
        l.includes(`model="${model}"`) &&
        l.includes(`status="${status}"`),
    );
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('numpy media types', () => {
  it('answers in the format and under the type an Accept of numpy’s asks for', async () => {
    for (const route of ['/predictions/addmul', '/predictions/addmul?via=koa']) {
      const response = await fetch(`${t.inference}${route}`, {
        method: 'POST',
        body: npz,
        headers: { 'content-type': 'application/x-npz', accept: 'application/x-npz' },
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/x-npz');
      const bytes = new Uint8Array(await response.arrayBuffer());
      // A zip (npz), not Kiln's default ndlist.
      expect([...bytes.subarray(0, 2)]).toEqual([0x50, 0x4b]);
      expect(decodeTensors(bytes).length).toBe(2);
    }
  });
});

describe('POST /predictions outside Koa', () => {
  it.each(cases)('answers $name as the Koa route does', async ({ route, body, headers }) => {
    const fast = await answer(route, body, headers);
    const viaKoa = await answer(`${route}?via=koa`, body, headers);
    expect(fast).toEqual(viaKoa);
  });

  it('counts and logs each request as the Koa route does', async () => {
    const headers = { 'content-type': 'tensor/npz' };
    const before = await requestCount('/predictions/:model', 'addmul', 200);
    logLines.length = 0;
    expect((await answer('/predictions/addmul', npz, headers)).status).toBe(200);
    expect((await answer('/predictions/addmul?via=koa', npz, headers)).status).toBe(200);
    expect((await answer('/predictions/addmul', '{"a": 1}', {})).status).toBe(400);
    expect((await answer('/predictions/addmul?via=koa', '{"a": 1}', {})).status).toBe(400);
    expect(await requestCount('/predictions/:model', 'addmul', 200)).toBe(before + 2);
    const access = logLines
      .filter((l) => l.msg === 'request')
      .map((line) => {
        // What differs from one request to the next; the rest must match.
        const { ms, time: _time, pid: _pid, hostname: _hostname, ...rest } = line;
        expect(typeof ms).toBe('number');
        return rest;
      });
    expect(access).toHaveLength(4);
    expect(access[0]).toEqual(access[1]);
    expect(access[2]).toEqual(access[3]);
    expect(access[0]).toMatchObject({
      api: 'inference',
      method: 'POST',
      path: '/predictions/addmul',
      status: 200,
      model: 'addmul',
    });
    expect(access[2]).toMatchObject({ status: 400, code: expect.any(String) });
  });

  it('leaves requests from hosts or origins the listener refuses to Koa (403)', async () => {
    const { port } = new URL(t.inference);
    for (const headers of [{ host: 'evil.example' }, { origin: 'https://evil.example' }]) {
      const { status, body } = await new Promise<{ status: number; body: string }>(
        (resolve, reject) => {
          const request = http.request(
            { host: '127.0.0.1', port, method: 'POST', path: '/predictions/iris', headers },
            (response) => {
              let text = '';
              response.setEncoding('utf8');
              response.on('data', (chunk: string) => (text += chunk));
              response.on('end', () => resolve({ status: response.statusCode!, body: text }));
            },
          );
          request.on('error', reject);
          request.end('[1, 2, 3, 4]');
        },
      );
      expect(status).toBe(403);
      expect(JSON.parse(body)).toMatchObject({ code: 403, type: 'Forbidden' });
    }
  });

  it('serves concurrent requests, each its own answer', async () => {
    const sums = await Promise.all(
      Array.from({ length: 64 }, async (_, i) => {
        const body = encodeNpz(
          NDList.of(
            new Tensor('float32', new Float32Array([i, 0, 0]), [1, 3], 'a'),
            new Tensor('float32', new Float32Array([1, 1, 1]), [1, 3], 'b'),
          ),
        );
        const response = await fetch(`${t.inference}/predictions/addmul`, {
          method: 'POST',
          body: Buffer.from(body),
          headers: { 'content-type': 'tensor/npz', accept: 'tensor/npz' },
        });
        const list = decodeTensors(new Uint8Array(await response.arrayBuffer()));
        return Array.from(list.get('sum').data as Float32Array);
      }),
    );
    sums.forEach((sum, i) => expect(sum).toEqual([i + 1, 1, 1]));
  });
});
