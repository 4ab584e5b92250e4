import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromFloat16Bits, toFloat16Bits } from '@kiln/core';
import { buildModelStore, type ModelStore } from '../support/fixtures.js';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';
import { rawRequest } from '../support/raw-http.js';

let store: ModelStore;
let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('v2');
  store = await buildModelStore(path.join(root, 'store'));
  t = await startTestServer({
    models: [
      `addmul=${store.addMul}`,
      `addmul:2=${store.addMul}`,
      `fp16=${store.fp16}`,
      `strings=${store.strings}`,
      `iris=${store.iris}`,
    ],
  });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const infer = (route: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${t.inference}/v2/models/${route}/infer`, {
    method: 'POST',
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
    headers,
  });
const addMulRequest = {
  id: 'req-42',
  inputs: [
    {
      name: 'a',
      shape: [2, 3],
      datatype: 'FP32',
      data: [
        [1, 2, 3],
        [4, 5, 6],
      ],
    },
    { name: 'b', shape: [2, 3], datatype: 'FP32', data: [0.5, 0.5, 0.5, 2, 2, 2] },
  ],
};

describe('server and health', () => {
  it('GET /v2 gives name, version and extensions', async () => {
    const { status, body } = await jsonOf(await fetch(`${t.inference}/v2`));
    expect(status).toBe(200);
    expect(body).toMatchObject({
      name: 'kiln',
      extensions: expect.arrayContaining(['binary_tensor_data']),
    });
  });

  it('live and ready answer 200 when every model serves', async () => {
    expect((await fetch(`${t.inference}/v2/health/live`)).status).toBe(200);
    expect((await fetch(`${t.inference}/v2/health/ready`)).status).toBe(200);
    expect((await fetch(`${t.inference}/v2/models/addmul/ready`)).status).toBe(200);
    expect((await fetch(`${t.inference}/v2/models/addmul/versions/2/ready`)).status).toBe(200);
  });
});

describe('model metadata', () => {
  it('describes inputs and outputs with v2 datatypes and -1 for dynamic dims', async () => {
    const { status, body } = await jsonOf(await fetch(`${t.inference}/v2/models/addmul`));
    expect(status).toBe(200);
    expect(body).toMatchObject({
      name: 'addmul',
      versions: ['2'],
      platform: 'onnxruntime_onnx',
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [-1, 3] },
        { name: 'b', datatype: 'FP32', shape: [-1, 3] },
      ],
      outputs: [
        { name: 'sum', datatype: 'FP32', shape: [-1, 3] },
        { name: 'product', datatype: 'FP32', shape: [-1, 3] },
      ],
    });
    const versioned = await jsonOf(await fetch(`${t.inference}/v2/models/addmul/versions/2`));
    expect(versioned.status).toBe(200);
  });

  it('answers 404 with {"error"} for unknown models and versions', async () => {
    for (const route of [
      '/v2/models/nope',
      '/v2/models/addmul/versions/7',
      '/v2/models/nope/ready',
    ]) {
      const { status, body } = await jsonOf(await fetch(`${t.inference}${route}`));
      expect(status).toBe(404);
      expect(body).toEqual({ error: expect.any(String) });
    }
  });
});

describe('POST /v2/models/{model}/infer', () => {
  it('computes JSON tensors (nested and flat), echoing the id', async () => {
    const { status, body } = await jsonOf(await infer('addmul', addMulRequest));
    expect(status).toBe(200);
    expect(body).toEqual({
      model_name: 'addmul',
      id: 'req-42',
      outputs: [
        { name: 'sum', datatype: 'FP32', shape: [2, 3], data: [1.5, 2.5, 3.5, 6, 7, 8] },
        { name: 'product', datatype: 'FP32', shape: [2, 3], data: [0.5, 1, 1.5, 8, 10, 12] },
      ],
    });
  });

  it('honours requested outputs and their order', async () => {
    const { body } = await jsonOf(
      await infer('addmul/versions/2', { ...addMulRequest, outputs: [{ name: 'product' }] }),
    );
    expect(
      (body as { outputs: { name: string }[]; model_version: string }).outputs.map((o) => o.name),
    ).toEqual(['product']);
    expect((body as { model_version: string }).model_version).toBe('2');
  });

  it('serves a model whose own translator answers JSON (the raw tensor path)', async () => {
    const { status, body } = await jsonOf(
      await infer('iris', {
        inputs: [{ name: 'features', shape: [1, 4], datatype: 'FP32', data: [5.1, 3.5, 1.4, 0.2] }],
      }),
    );
    expect(status).toBe(200);
    const probabilities = (body as { outputs: { data: number[] }[] }).outputs[0]!.data;
    expect(probabilities).toHaveLength(3);
    expect(probabilities[0]).toBeGreaterThan(0.9);
  });

  it('takes binary inputs and returns binary outputs (binary-data extension)', async () => {
    const a = new Float32Array([1, 2, 3, 4, 5, 6]);
    const b = new Float32Array([2, 2, 2, 3, 3, 3]);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          {
            name: 'a',
            shape: [2, 3],
            datatype: 'FP32',
            parameters: { binary_data_size: a.byteLength },
          },
          {
            name: 'b',
            shape: [2, 3],
            datatype: 'FP32',
            parameters: { binary_data_size: b.byteLength },
          },
        ],
        outputs: [{ name: 'sum', parameters: { binary_data: true } }, { name: 'product' }],
      }),
    );
    const body = Buffer.concat([header, Buffer.from(a.buffer), Buffer.from(b.buffer)]);
    const response = await infer('addmul', body, {
      'inference-header-content-length': String(header.byteLength),
      'content-type': 'application/octet-stream',
    });
    expect(response.status).toBe(200);
    const jsonLength = Number(response.headers.get('inference-header-content-length'));
    const bytes = Buffer.from(await response.arrayBuffer());
    const reply = JSON.parse(bytes.subarray(0, jsonLength).toString()) as {
      outputs: { name: string; data?: number[]; parameters?: { binary_data_size: number } }[];
    };
    expect(reply.outputs[0]).toMatchObject({ name: 'sum', parameters: { binary_data_size: 24 } });
    const sum = new Float32Array(
      bytes.buffer.slice(bytes.byteOffset + jsonLength, bytes.byteOffset + jsonLength + 24),
    );
    expect(Array.from(sum)).toEqual([3, 4, 5, 7, 8, 9]);
    expect(reply.outputs[1]).toMatchObject({ name: 'product', data: [2, 4, 6, 12, 15, 18] });
  });

  it('round-trips FP16 (as numbers in JSON, and as raw halves in binary) and BYTES', async () => {
    const halves = [0.5, -2, 1024, 0.0999755859375];
    const json = await jsonOf(
      await infer('fp16', {
        inputs: [{ name: 'x', shape: [1, 4], datatype: 'FP16', data: halves }],
      }),
    );
    expect(json.status).toBe(200);
    expect(
      (json.body as { outputs: { datatype: string; data: number[] }[] }).outputs[0],
    ).toMatchObject({ datatype: 'FP16', data: halves });

    const bits = new Uint16Array(halves.map((v) => toFloat16Bits(v)));
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'x', shape: [1, 4], datatype: 'FP16', parameters: { binary_data_size: 8 } },
        ],
        parameters: { binary_data_output: true },
      }),
    );
    const response = await infer('fp16', Buffer.concat([header, Buffer.from(bits.buffer)]), {
      'inference-header-content-length': String(header.byteLength),
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    const jsonLength = Number(response.headers.get('inference-header-content-length'));
    const out = new Uint16Array(
      bytes.buffer.slice(bytes.byteOffset + jsonLength, bytes.byteOffset + jsonLength + 8),
    );
    expect(Array.from(out, (b) => fromFloat16Bits(b))).toEqual(halves);

    const words = ['kiln', 'zürich', '', '✓ ok'];
    const strings = await jsonOf(
      await infer('strings', {
        inputs: [{ name: 'x', shape: [1, 4], datatype: 'BYTES', data: words }],
      }),
    );
    expect(strings.status).toBe(200);
    expect(
      (strings.body as { outputs: { datatype: string; data: string[] }[] }).outputs[0],
    ).toMatchObject({ datatype: 'BYTES', data: words });
  });

  it.each([
    ['malformed JSON', '{"inputs": [', {}],
    ['no inputs array', '{"id": "x"}', {}],
    [
      'wrong datatype',
      {
        inputs: [
          { name: 'a', shape: [1, 3], datatype: 'INT32', data: [1, 2, 3] },
          { name: 'b', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] },
        ],
      },
      {},
    ],
    [
      'wrong shape',
      {
        inputs: [
          { name: 'a', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] },
          { name: 'b', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] },
        ],
      },
      {},
    ],
    [
      'data not matching shape',
      { inputs: [{ name: 'a', shape: [2, 3], datatype: 'FP32', data: [1, 2, 3] }] },
      {},
    ],
    [
      'unknown input name',
      {
        inputs: [
          { name: 'z', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] },
          { name: 'b', shape: [1, 3], datatype: 'FP32', data: [1, 2, 3] },
        ],
      },
      {},
    ],
    ['unknown requested output', { ...addMulRequest, outputs: [{ name: 'nope' }] }, {}],
    ['header length past the body', '{"inputs":[]}', { 'inference-header-content-length': '999' }],
    [
      'binary size past the body',
      '{"inputs":[{"name":"a","shape":[2,3],"datatype":"FP32","parameters":{"binary_data_size":24}}]}',
      { 'inference-header-content-length': '93' },
    ],
  ])('answers 400 {"error"} for %s and keeps serving', async (_label, body, headers) => {
    const bad = await jsonOf(
      await infer('addmul', body as string, headers as Record<string, string>),
    );
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: expect.any(String) });
    expectCleanError(bad.body);
    expect((await infer('addmul', addMulRequest)).status).toBe(200);
  });

  it('answers 404 for an unknown model', async () => {
    const { status, body } = await jsonOf(await infer('nope', addMulRequest));
    expect(status).toBe(404);
    expect(body).toEqual({ error: 'model nope not found' });
  });
});

describe('model repository extension', () => {
  let repo: TestServer;
  let repoStore: string;

  beforeAll(async () => {
    // A store of its own: the tests load, unload and break models in it.
    repoStore = path.join(root, 'repository');
    fs.cpSync(store.iris, path.join(repoStore, 'iris'), { recursive: true });
    fs.cpSync(store.addMul, path.join(repoStore, 'addmul'), { recursive: true });
    fs.mkdirSync(path.join(repoStore, 'broken'));
    fs.writeFileSync(path.join(repoStore, 'broken', 'model.onnx'), 'not an onnx file');
    repo = await startTestServer({
      config: { model_store: repoStore },
      models: [`addmul=${path.join(repoStore, 'addmul')}`],
    });
    await repo.settled();
  });

  afterAll(async () => {
    await repo?.stop();
  });

  const repository = (route: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${repo.inference}/v2/repository${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${repo.token}`, ...headers },
      ...(body === undefined
        ? {}
        : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
  const index = async () =>
    (await jsonOf(await repository('/index'))).body as {
      name: string;
      version: string;
      state: string;
      reason: string;
    }[];
  const irisInfer = () =>
    fetch(`${repo.inference}/v2/models/iris/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [{ name: 'features', shape: [1, 4], datatype: 'FP32', data: [5.1, 3.5, 1.4, 0.2] }],
      }),
    });

  it('is advertised by GET /v2 where it is served', async () => {
    const { body } = await jsonOf(await fetch(`${repo.inference}/v2`));
    expect((body as { extensions: string[] }).extensions).toContain('model_repository');
  });

  it('refuses clients without the management key, and hostile pages with it, in JSON', async () => {
    for (const headers of [{ authorization: '' }, { authorization: 'Bearer wrong' }]) {
      const {
        status,
        body,
        headers: answer,
      } = await jsonOf(await repository('/index', undefined, headers));
      expect(status).toBe(401);
      expect(answer.get('www-authenticate')).toBe('Bearer');
      expect((body as { error: string }).error).toMatch(/bearer token/);
      expectCleanError(body);
    }
    const unloaded = await jsonOf(
      await repository('/models/addmul/unload', undefined, { authorization: '' }),
    );
    expect(unloaded.status).toBe(401);
    // A page elsewhere that learned the key still cannot use it from a browser…
    const crossSite = await jsonOf(
      await repository('/models/iris/load', undefined, { origin: 'http://evil.example' }),
    );
    expect(crossSite.status).toBe(403);
    expect((crossSite.body as { error: string }).error).toMatch(/cross-origin/);
    // …nor through a host name rebound to this machine.
    const rebound = await rawRequest(
      repo.inference,
      `POST /v2/repository/index HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer ${repo.token}\r\nContent-Length: 0\r\n\r\n`,
    );
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body)).toMatchObject({ error: expect.any(String) });
    // Nothing was loaded by any of them.
    expect(repo.server.models.has('iris')).toBe(false);
  });

  it('indexes the models served and those the store holds, with their state', async () => {
    const listed = await index();
    expect(listed).toEqual([
      { name: 'addmul', version: '', state: 'READY', reason: '' },
      { name: 'broken', version: '', state: 'UNAVAILABLE', reason: 'not loaded' },
      { name: 'iris', version: '', state: 'UNAVAILABLE', reason: 'not loaded' },
    ]);
    const ready = await jsonOf(await repository('/index', { ready: true }));
    expect(ready.body).toEqual([{ name: 'addmul', version: '', state: 'READY', reason: '' }]);
  });

  it('loads a store model by name with parameters, then unloads it', async () => {
    expect((await irisInfer()).status).toBe(404);
    const loaded = await jsonOf(
      await repository('/models/iris/load', { parameters: { batch_size: '2', max_worker: 1 } }),
    );
    expect(loaded).toMatchObject({ status: 200, body: { name: 'iris', state: 'READY' } });
    expect(await index()).toContainEqual({ name: 'iris', version: '', state: 'READY', reason: '' });
    expect(repo.server.models.describe('iris')[0]).toMatchObject({ batchSize: 2 });
    expect((await irisInfer()).status).toBe(200);
    // Loading a loaded model reloads it, from the store's files as they are.
    expect((await repository('/models/iris/load')).status).toBe(200);
    expect((await irisInfer()).status).toBe(200);

    const unloaded = await jsonOf(await repository('/models/iris/unload', {}));
    expect(unloaded).toMatchObject({ status: 200, body: { name: 'iris' } });
    expect(await index()).toContainEqual({
      name: 'iris',
      version: '',
      state: 'UNAVAILABLE',
      reason: 'not loaded',
    });
    expect((await irisInfer()).status).toBe(404);
    expect((await jsonOf(await fetch(`${repo.inference}/v2/models/iris`))).status).toBe(404);
  });

  it('answers 404 in JSON for models it does not know', async () => {
    for (const route of ['/models/nope/load', '/models/nope/unload']) {
      const { status, body } = await jsonOf(await repository(route));
      expect(status, route).toBe(404);
      expect((body as { error: string }).error).toMatch(/model nope/);
      expectCleanError(body);
    }
  });

  it('refuses malformed requests with 400, and names, parameters it cannot take', async () => {
    const cases: [string, unknown, RegExp][] = [
      ['/index', 'not json', /not valid JSON/],
      ['/index', { ready: 'yes' }, /ready/],
      ['/models/iris/load', { parameters: { config: '{}' } }, /config is not supported/],
      ['/models/iris/load', { parameters: { 'file:1/model.onnx': 'AAAA' } }, /not supported/],
      ['/models/iris/load', { parameters: { min_workers: 1 } }, /unknown load parameter/],
      ['/models/iris/load', { parameters: { batch_size: 0 } }, /batch_size/],
      ['/models/iris/load', { parameters: [] }, /parameters/],
      ['/models/a%2Fb/load', undefined, /model name/],
    ];
    for (const [route, body, message] of cases) {
      const answer = await jsonOf(await repository(route, body));
      expect(answer.status, `${route} ${JSON.stringify(body)}`).toBe(400);
      expect((answer.body as { error: string }).error).toMatch(message);
    }
    expect(repo.server.models.has('iris')).toBe(false);
  });

  it('reports a store model that fails to load as UNAVAILABLE with the reason, no paths', async () => {
    const failed = await jsonOf(await repository('/models/broken/load'));
    expect(failed.status).toBe(500);
    expectCleanError(failed.body);
    const broken = (await index()).find((m) => m.name === 'broken')!;
    expect(broken).toMatchObject({ state: 'UNAVAILABLE', reason: expect.any(String) });
    expect(broken.reason).not.toBe('not loaded');
    expect(JSON.stringify(failed.body) + broken.reason).not.toContain(repoStore);
    expect((await repository('/models/broken/unload')).status).toBe(200);
  });

  it('is not served, nor advertised, where nothing could guard it', async () => {
    // Token authorization off and the inference listener reachable from the network.
    const open = await startTestServer({
      config: {
        disable_token_authorization: 'true',
        inference_address: 'http://0.0.0.0:0',
        model_store: repoStore,
      },
    });
    try {
      const port = new URL(open.inference).port;
      const local = `http://127.0.0.1:${port}`;
      const { body } = await jsonOf(await fetch(`${local}/v2`));
      expect((body as { extensions: string[] }).extensions).not.toContain('model_repository');
      const { status } = await jsonOf(
        await fetch(`${local}/v2/repository/models/iris/load`, { method: 'POST' }),
      );
      expect(status).toBe(404);
      expect(open.server.models.has('iris')).toBe(false);
    } finally {
      await open.stop();
    }
  });
});
