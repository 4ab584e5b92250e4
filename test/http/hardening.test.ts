// Regression tests of issue #12: each sends the exact request that once crashed, bloated or
// hijacked the server, checks the answer, and checks that the server still serves afterwards.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { zipSync } from 'fflate';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, encodeNpy, encodeNpz } from '@kiln/core';
import { buildModelStore, type ModelStore } from '../support/fixtures.js';
import { rawRequest } from '../support/raw-http.js';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  sleep,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let root: string;
let store: ModelStore;
let outside: string;
let t: TestServer;
const logLines: string[] = [];
const MAX = 1024 * 1024;

beforeAll(async () => {
  root = fs.realpathSync(tempDir('hardening'));
  store = await buildModelStore(path.join(root, 'store'));
  outside = path.join(root, 'outside');
  fs.cpSync(store.iris, outside, { recursive: true });
  // A folder inside the store whose model file links out of it.
  const linked = path.join(store.dir, 'linked');
  fs.mkdirSync(linked);
  for (const file of fs.readdirSync(store.iris))
    if (file !== 'model.onnx')
      fs.copyFileSync(path.join(store.iris, file), path.join(linked, file));
  fs.symlinkSync(path.join(outside, 'model.onnx'), path.join(linked, 'model.onnx'));
  // A model whose file is corrupt: it registers and FAILS to load.
  fs.mkdirSync(path.join(store.dir, 'broken'));
  fs.writeFileSync(path.join(store.dir, 'broken', 'model.onnx'), 'not an onnx file');
  // A translator with a bug (a TypeError, not a KilnError) in processInput.
  const buggy = path.join(store.dir, 'buggy');
  fs.cpSync(store.iris, buggy, { recursive: true });
  fs.writeFileSync(
    path.join(buggy, 'translator.mjs'),
    `export default { name: 'buggy', async newInstance(_m, _a, kit) { return {
      batchifier: null,
      processInput(_ctx, input) { return input.body.no.such.field; },
      processOutput() { return { type: 'json', value: [] }; } }; } };\n`,
  );
  // serving.properties with the misspelled key the issue names.
  const typo = path.join(store.dir, 'typo');
  fs.cpSync(store.addMul, typo, { recursive: true });
  fs.appendFileSync(path.join(typo, 'serving.properties'), 'max_workers=4\n');

  const sink = new Writable({
    write(chunk, _encoding, done) {
      logLines.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  t = await startTestServer({
    models: [`addmul=${store.addMul}`, `iris=${store.iris}`],
    config: { model_store: store.dir, max_request_size: String(MAX), client_body_timeout: '400' },
    logger: pino({ level: 'warn' }, sink),
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

async function stillServes(server: TestServer = t): Promise<void> {
  const response = await fetch(`${server.inference}/predictions/addmul`, {
    method: 'POST',
    body: good(),
    headers: { accept: 'application/json' },
  });
  expect(response.status).toBe(200);
  expect(await response.json()).toMatchObject([
    { name: 'sum', data: [3, 3, 3] },
    { name: 'product', data: [2, 2, 2] },
  ]);
}

/** A JSON error body with no stack trace and no server path. */
function expectSafe(body: unknown): void {
  expect(body).toBeTypeOf('object');
  const text = expectCleanError(body);
  expect(text).not.toContain(root);
  expect(text).not.toMatch(/"\/(?:tmp|home|work|etc|usr)\//);
}

describe('issue #12 defects stay fixed', () => {
  it('1: a multipart file part without its closing boundary is a 400, not a crash', async () => {
    const body =
      '--XyZ\r\nContent-Disposition: form-data; name="x"; filename="x.bin"\r\nContent-Type: tensor/npy\r\n\r\nabc\r\n';
    for (let i = 0; i < 10; i++) {
      const { status, body: answer } = await jsonOf(
        await fetch(`${t.inference}/predictions/addmul`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'multipart/form-data; boundary=XyZ' },
        }),
      );
      expect(status).toBe(400);
      expectSafe(answer);
    }
    await stillServes();
  });

  it('2: an npz bomb is refused before it is inflated', async () => {
    // 64 MiB of zeros deflate to ~64 KiB: under max_request_size as sent, 64× over it inflated.
    const bomb = zipSync(
      { 'a.npy': encodeNpy(new Tensor('float32', new Float32Array(16 * MAX), [16 * MAX])) },
      { level: 9 },
    );
    expect(bomb.byteLength).toBeLessThan(MAX);
    const before = process.memoryUsage().rss;
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        fetch(`${t.inference}/predictions/addmul`, {
          method: 'POST',
          body: bomb,
          headers: { 'content-type': 'tensor/npz' },
        }).then(jsonOf),
      ),
    );
    for (const { status, body } of answers) {
      expect(status).toBe(413);
      expectSafe(body);
    }
    // The server shares this process: four bombs must not cost it anything like 4 × 64 MiB.
    expect(process.memoryUsage().rss - before).toBeLessThan(4 * 4 * MAX + 32 * MAX);
    await stillServes();
  });

  it('3: the management API refuses a cross-site registration (Host, Origin, token)', async () => {
    const url = `${t.management}/models?url=iris&model_name=x`;
    const forged = await jsonOf(
      await fetch(url, {
        method: 'POST',
        headers: {
          host: 'evil.example:8081',
          origin: 'http://evil.example',
          'content-type': 'text/plain',
        },
      }),
    );
    expect(forged.status).toBe(403);
    expectSafe(forged.body);
    const noKey = await jsonOf(await fetch(url, { method: 'POST' }));
    expect(noKey.status).toBe(401);
    const foreignOrigin = await jsonOf(
      await t.manage('/models?url=iris&model_name=x', {
        method: 'POST',
        headers: { origin: 'http://evil.example' },
      }),
    );
    expect(foreignOrigin.status).toBe(403);
    // DNS rebinding: the right key is not enough under a foreign Host.
    const rebound = await rawRequest(
      t.management,
      `GET /models HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${t.token}\r\n\r\n`,
    );
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body)).toMatchObject({ code: 403 });
    // The inference listener checks Host and Origin too.
    const predicted = await fetch(`${t.inference}/predictions/addmul`, {
      method: 'POST',
      body: good(),
      headers: { origin: 'http://evil.example' },
    });
    expect(predicted.status).toBe(403);
    expect((await t.manage('/models/x')).status).toBe(404);
    await stillServes();
  });

  it('4: a model file that links out of the store is refused', async () => {
    const { status, body } = await jsonOf(await t.manage('/models?url=linked', { method: 'POST' }));
    expect(status).toBe(403);
    expectSafe(body);
    expect((await t.manage('/models/linked')).status).toBe(404);
    await stillServes();
  });

  it('5: paths outside the store answer alike whether they exist or not', async () => {
    const existing = await jsonOf(await t.manage('/models?url=/etc/passwd', { method: 'POST' }));
    const missing = await jsonOf(
      await t.manage('/models?url=/no/such/model-folder', { method: 'POST' }),
    );
    expect(existing.status).toBe(403);
    expect(missing.status).toBe(403);
    expect(missing.body).toEqual(existing.body);
    await stillServes();
  });

  it('6: a FAILED model is reported without server paths', async () => {
    await t.manage('/models?url=broken&synchronous=false', { method: 'POST' });
    for (let i = 0; i < 200; i++) {
      const described = await jsonOf(await t.manage('/models/broken'));
      if ((described.body as { status: string }[])[0]?.status === 'FAILED') break;
      await sleep(25);
    }
    const predicted = await jsonOf(
      await fetch(`${t.inference}/predictions/broken`, { method: 'POST', body: '[1]' }),
    );
    expect(predicted.status).toBe(500);
    expectSafe(predicted.body);
    expect((predicted.body as { message: string }).message).toMatch(/model\.onnx/);
    for (const route of ['/models/broken', '/models', '/models/iris']) {
      const { body } = await jsonOf(await t.manage(route));
      expectSafe(body);
    }
    await stillServes();
  });

  it('7: 405, 501 and parser errors answer JSON', async () => {
    const put = await jsonOf(await fetch(`${t.inference}/predictions/addmul`, { method: 'PUT' }));
    expect(put.status).toBe(405);
    expect(put.body).toMatchObject({ code: 405 });
    const trace = await rawRequest(
      t.inference,
      'TRACE /openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
    );
    expect(trace.status).toBe(501);
    expect(JSON.parse(trace.body)).toMatchObject({ code: 501 });
    const framing = await rawRequest(
      t.inference,
      'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
    );
    expect(framing.status).toBe(400);
    expect(JSON.parse(framing.body)).toMatchObject({ code: 400 });
    const garbage = await rawRequest(t.inference, '\x00\x01\x02 not http\r\n\r\n');
    expect(garbage.status).toBe(400);
    expect(JSON.parse(garbage.body)).toMatchObject({ code: 400 });
    const huge = await rawRequest(
      t.inference,
      `GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expect(huge.status).toBe(431);
    expect(JSON.parse(huge.body)).toMatchObject({ code: 431 });
    await stillServes();
  });

  it('8: a stalled body gets a JSON 408 within client_body_timeout', async () => {
    const stalled = await rawRequest(
      t.inference,
      'POST /predictions/addmul HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nab',
    );
    expect(stalled.status).toBe(408);
    expect(JSON.parse(stalled.body)).toMatchObject({ code: 408, type: 'RequestTimeout' });
    expect(stalled.headers.connection).toBe('close');
    await stillServes();
  });

  it('8: stalled headers get a JSON 408, and connections past max_connections a JSON 503', async () => {
    const small = await startTestServer({
      models: [`addmul=${store.addMul}`],
      config: { client_header_timeout: '500', max_connections: '3' },
    });
    try {
      await small.settled();
      const slowHeaders = await rawRequest(small.inference, 'GET /ping HTTP/1.1\r\nHost: 127.0');
      expect(slowHeaders.status).toBe(408);
      expect(JSON.parse(slowHeaders.body)).toMatchObject({ code: 408 });
      const held = await Promise.all(
        [0, 1, 2].map(
          () =>
            new Promise<net.Socket>((resolve) => {
              const s = new net.Socket();
              s.connect(Number(new URL(small.inference).port), '127.0.0.1', () => resolve(s));
            }),
        ),
      );
      const refused = await rawRequest(
        small.inference,
        'GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
      );
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 503 });
      for (const socket of held) socket.destroy();
      await sleep(50);
      await stillServes(small);
    } finally {
      await small.stop();
    }
  });

  it('9: an absurd chunk size does not hold the connection until request_timeout', async () => {
    const answer = await rawRequest(
      t.inference,
      'POST /predictions/addmul HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\nabc',
    );
    // 413 as soon as the size line arrives (a stalled body would get 408 from the idle timer).
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 413, type: 'PayloadTooLarge' });
    await stillServes();
  });

  it('10: a translator bug is a generic 500; its own KilnErrors stay 400', async () => {
    expect((await t.manage('/models?url=buggy', { method: 'POST' })).status).toBe(200);
    const bug = await jsonOf(
      await fetch(`${t.inference}/predictions/buggy`, { method: 'POST', body: '[1,2,3,4]' }),
    );
    expect(bug.status).toBe(500);
    expect(bug.body).toMatchObject({ code: 500, type: 'Internal' });
    expect(JSON.stringify(bug.body)).not.toMatch(/undefined|reading/);
    const invalid = await jsonOf(
      await fetch(`${t.inference}/predictions/iris`, { method: 'POST', body: '[1,2]' }),
    );
    expect(invalid.status).toBe(400);
    await stillServes();
  });

  it('11: worker counts are capped and misspelled serving.properties keys are warned about', async () => {
    const many = await jsonOf(
      await t.manage('/models/iris?max_worker=100000&synchronous=true', { method: 'PUT' }),
    );
    expect(many.status).toBe(400);
    expect((many.body as { message: string }).message).toMatch(/max_workers_limit/);
    const register = await jsonOf(
      await t.manage('/models?url=addmul&model_name=am2&max_worker=100000', { method: 'POST' }),
    );
    expect(register.status).toBe(400);
    expect((await t.manage('/models?url=typo', { method: 'POST' })).status).toBe(200);
    expect(logLines.join('\n')).toMatch(/unknown key max_workers \(did you mean maxWorkers\?\)/);
    await stillServes();
  });

  it('12: unknown model names share one metric label', async () => {
    for (let i = 0; i < 50; i++)
      await fetch(`${t.inference}/predictions/nosuch-${i}`, { method: 'POST', body: '1' });
    const text = await (await fetch(`${t.metrics}/metrics`)).text();
    expect(text).not.toMatch(/nosuch-/);
    expect(text).toMatch(/kiln_requests_total\{[^}]*model="_unknown"[^}]*status="404"/);
    await stillServes();
  });
});

describe('kiln serve', () => {
  it('13: writes access logs as JSON lines on stdout, and a 0600 management key file', async () => {
    const home = tempDir('serve-home');
    const bin = fileURLToPath(new URL('../../apps/cli/bin/kiln.mjs', import.meta.url));
    const child = spawn(
      bin,
      [
        'serve',
        '-m',
        `addmul=${store.addMul}`,
        '--inference-address',
        'http://127.0.0.1:0',
        '--management-address',
        'http://127.0.0.1:0',
        '--metrics-address',
        'http://127.0.0.1:0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KILN_HOME: home } },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d.toString()));
    child.stderr.on('data', (d) => (stderr += d.toString()));
    try {
      for (let i = 0; i < 600 && !/READY|FAILED/.test(stderr); i++) await sleep(50);
      const inference = /inference\s+(http:\/\/\S+)/.exec(stderr)![1]!;
      const management = /management\s+(http:\/\/\S+)/.exec(stderr)![1]!;
      const keyFile = path.join(home, 'key_file.json');
      expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
      const key = JSON.parse(fs.readFileSync(keyFile, 'utf8')).management.key as string;
      expect(stderr).toContain(key);
      for (let i = 0; i < 5; i++) await fetch(`${inference}/ping`);
      expect((await fetch(`${management}/models`, { method: 'POST' })).status).toBe(401);
      const listed = await fetch(`${management}/models`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(listed.status).toBe(200);
      await sleep(200);
      const lines = stdout.split('\n').filter(Boolean);
      const records = lines.map((line) => JSON.parse(line) as { msg: string; path?: string });
      expect(records.filter((r) => r.msg === 'request' && r.path === '/ping')).toHaveLength(5);
    } finally {
      child.kill('SIGKILL');
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('refuses a mutating management call without the key on every bind address', async () => {
    const interfaces = Object.values(os.networkInterfaces())
      .flat()
      .filter((i) => i && !i.internal && i.family === 'IPv4')
      .map((i) => i!.address);
    const home = tempDir('bind-home');
    const wide = await startTestServer({
      config: {
        management_address: 'http://0.0.0.0:0',
        management_token: '',
        key_file: path.join(home, 'key_file.json'),
        model_store: store.dir,
      },
    });
    try {
      expect(fs.statSync(path.join(home, 'key_file.json')).mode & 0o777).toBe(0o600);
      const port = new URL(wide.management).port;
      for (const address of ['127.0.0.1', ...interfaces]) {
        const refused = await fetch(`http://${address}:${port}/models?url=iris&model_name=y`, {
          method: 'POST',
        });
        expect(refused.status).toBe(401);
      }
      expect((await wide.manage('/models?url=iris&model_name=y', { method: 'POST' })).status).toBe(
        200,
      );
    } finally {
      await wide.stop();
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  it('refuses it on an IPv6 loopback bind too', async (context) => {
    const v6 = await startTestServer({
      config: { management_address: 'http://[::1]:0', model_store: store.dir },
    }).catch(() => undefined);
    if (!v6) {
      console.log('skipped: no IPv6 loopback on this machine');
      context.skip();
      return;
    }
    try {
      const port = new URL(v6.management).port;
      const refused = await fetch(`http://[::1]:${port}/models?url=iris&model_name=z`, {
        method: 'POST',
      });
      expect(refused.status).toBe(401);
      const wrongHost = await rawRequest(
        v6.management,
        `POST /models?url=iris HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${v6.token}\r\n\r\n`,
      );
      expect(wrongHost.status).toBe(403);
    } finally {
      await v6.stop();
    }
  });
});
