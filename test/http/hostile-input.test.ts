import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, encodeNpy, encodeNpz } from '@kiln/core';
import { buildModelStore, type ModelStore } from '../support/fixtures.js';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let store: ModelStore;
let t: TestServer;
let root: string;
const MAX = 64 * 1024;

beforeAll(async () => {
  root = tempDir('hostile');
  store = await buildModelStore(path.join(root, 'store'));
  t = await startTestServer({
    models: [`addmul=${store.addMul}`, `iris=${store.iris}`],
    config: { max_request_size: String(MAX) },
  });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const good = () =>
  Buffer.from(
    encodeNpz(
      NDList.of(
        new Tensor('float32', new Float32Array(3).fill(1), [1, 3], 'a'),
        new Tensor('float32', new Float32Array(3).fill(2), [1, 3], 'b'),
      ),
    ),
  );
const post = (
  route: string,
  body: NonNullable<RequestInit['body']>,
  headers: Record<string, string> = {},
) => fetch(`${t.inference}${route}`, { method: 'POST', body, headers });

async function stillServes(): Promise<void> {
  const response = await post('/predictions/addmul', good(), { accept: 'application/json' });
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject([
    { name: 'sum', data: [3, 3, 3] },
    { name: 'product', data: [2, 2, 2] },
  ]);
}

const truncatedNpy = Buffer.from(
  encodeNpy(new Tensor('float32', new Float32Array(6), [2, 3])),
).subarray(0, 70);
const lyingNpz = (() => {
  const bytes = Buffer.from(
    encodeNpz(NDList.of(new Tensor('float32', new Float32Array(3), [1, 3], 'a'))),
  );
  bytes.writeUInt32LE(0x7fffffff, 22); // the local header's uncompressed size
  return bytes;
})();

describe('bad requests get a clear JSON error and the server keeps serving', () => {
  it.each<[string, string, NonNullable<RequestInit['body']>, Record<string, string>, number]>([
    [
      'malformed JSON',
      '/predictions/addmul',
      '{"inputs": [1, 2',
      { 'content-type': 'application/json' },
      400,
    ],
    [
      'wrong dtype',
      '/predictions/addmul',
      Buffer.from(
        encodeNpz(
          NDList.of(
            new Tensor('int32', new Int32Array(3), [1, 3], 'a'),
            new Tensor('float32', new Float32Array(3), [1, 3], 'b'),
          ),
        ),
      ),
      {},
      400,
    ],
    [
      'wrong shape',
      '/predictions/addmul',
      Buffer.from(
        encodeNpz(
          NDList.of(
            new Tensor('float32', new Float32Array(4), [1, 4], 'a'),
            new Tensor('float32', new Float32Array(4), [1, 4], 'b'),
          ),
        ),
      ),
      {},
      400,
    ],
    [
      'wrong input names',
      '/predictions/addmul',
      Buffer.from(
        encodeNpz(
          NDList.of(
            new Tensor('float32', new Float32Array(3), [1, 3], 'x'),
            new Tensor('float32', new Float32Array(3), [1, 3], 'y'),
          ),
        ),
      ),
      {},
      400,
    ],
    [
      'a missing input',
      '/predictions/addmul',
      Buffer.from(encodeNpz(NDList.of(new Tensor('float32', new Float32Array(3), [1, 3], 'a')))),
      {},
      400,
    ],
    ['a truncated npy tensor', '/predictions/addmul', truncatedNpy, {}, 400],
    ['an npz lying about its sizes', '/predictions/addmul', lyingNpz, {}, 400],
    [
      'random bytes',
      '/predictions/addmul',
      Buffer.from('\u0000\u0001garbage that is no tensor format'),
      {},
      400,
    ],
    ['an empty body', '/predictions/addmul', '', {}, 400],
    [
      'a body the demo translator cannot read',
      '/predictions/iris',
      'not json',
      { 'content-type': 'application/json' },
      400,
    ],
    ['an unknown model', '/predictions/nope', good(), {}, 404],
    ['an unknown route', '/nothing/here', 'x', {}, 404],
    ['an oversized body', '/predictions/addmul', Buffer.alloc(MAX + 1), {}, 413],
  ])('%s', async (_label, route, body, headers, status) => {
    const { status: got, body: reply } = await jsonOf(await post(route, body, headers));
    expect(got).toBe(status);
    expect(reply).toMatchObject({
      code: status,
      type: expect.any(String),
      message: expect.any(String),
    });
    expectCleanError(reply);
    await stillServes();
  });

  it('refuses a chunked body past max_request_size without buffering it all', async () => {
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > MAX * 64) return controller.close();
        sent += 16 * 1024;
        controller.enqueue(new Uint8Array(16 * 1024));
      },
    });
    const response = await fetch(`${t.inference}/predictions/addmul`, {
      method: 'POST',
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(413);
    expect(sent).toBeLessThan(MAX * 64);
    await stillServes();
  });

  it('survives a client that promises more bytes than it sends, and one that sends more', async () => {
    const { port } = new URL(t.inference);
    const raw = (request: string) =>
      new Promise<string>((resolve) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.end(request));
        let reply = '';
        socket.on('data', (d) => (reply += d.toString()));
        socket.on('close', () => resolve(reply));
        socket.on('error', () => resolve(reply));
      });
    await raw('POST /predictions/addmul HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\nshort');
    const extra = await raw(
      'POST /predictions/addmul HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}garbage-after-the-body',
    );
    expect(extra).toMatch(/^HTTP\/1\.1 4\d\d/);
    await stillServes();
  });

  it('answers a flood of mixed bad requests without losing the good ones', async () => {
    const bad = [truncatedNpy, lyingNpz, Buffer.from('{'), Buffer.alloc(0)];
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        (i % 5 === 0
          ? post('/predictions/addmul', good())
          : post('/predictions/addmul', bad[i % bad.length]!)
        ).then((r) => [i, r.status] as const),
      ),
    );
    for (const [i, status] of results) expect(status).toBe(i % 5 === 0 ? 200 : 400);
  });
});
