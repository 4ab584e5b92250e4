import fs from 'node:fs';
import path from 'node:path';
import { zipSync } from 'fflate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServerConfig, startKilnServer } from '@kiln/server';
import { buildModelStore, type ModelStore } from '../support/fixtures.js';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  sleep,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let store: ModelStore;
let t: TestServer;
let root: string;
let outside: string;

beforeAll(async () => {
  root = tempDir('management');
  store = await buildModelStore(path.join(root, 'store'));
  outside = path.join(root, 'outside');
  fs.cpSync(store.addMul, outside, { recursive: true });
  // Worker counts and threads as described below: the store's tiny models stay on threads.
  t = await startTestServer({ config: { model_store: store.dir, placement: 'thread' } });
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const manage = (method: string, route: string) => t.manage(route, { method });
const register = (query: string) => manage('POST', `/models?${query}`);

describe('register, describe, list, scale, unregister', () => {
  it('registers a model from the store synchronously and serves it', async () => {
    const { status, body } = await jsonOf(
      await register(
        `url=${encodeURIComponent(store.addMul)}&model_name=am&batch_size=4&max_batch_delay=10&min_worker=1&max_worker=2`,
      ),
    );
    expect(status).toBe(200);
    expect(body).toEqual({ status: 'Model "am" registered.' });
    const described = await jsonOf(await manage('GET', '/models/am'));
    expect(described.status).toBe(200);
    expect((described.body as unknown[])[0]).toMatchObject({
      modelName: 'am',
      engine: 'OnnxRuntime',
      status: 'Healthy',
      batchSize: 4,
      maxBatchDelay: 10,
      queueSize: 1000,
      requestInQueue: 0,
      workerGroups: [
        {
          device: 'cpu',
          minWorkers: 1,
          maxWorkers: 2,
          workers: [
            expect.objectContaining({ id: expect.any(Number), startTime: expect.any(String) }),
          ],
        },
      ],
    });
  });

  it('registers relative store paths and file:// URLs, asynchronously with 202', async () => {
    const { status } = await jsonOf(await register(`url=iris&synchronous=false`));
    expect(status).toBe(202);
    const ping = await jsonOf(await fetch(`${t.inference}/ping`));
    expect(['PENDING', 'Healthy']).toContain(
      (ping.body as Record<string, { status: string }>).iris!.status,
    );
    await t.server.models.get('iris').loading;
    expect((await jsonOf(await fetch(`${t.inference}/ping`))).body).toMatchObject({
      iris: { status: 'Healthy' },
    });
    const file = await jsonOf(
      await register(`url=${encodeURIComponent(`fp16::OnnxRuntime=file://${store.fp16}`)}`),
    );
    expect(file.status).toBe(200);
  });

  it('lists models with pagination', async () => {
    const first = await jsonOf(await manage('GET', '/models?limit=2'));
    expect(first.body).toMatchObject({
      models: [{ modelName: 'am' }, { modelName: 'fp16' }],
      nextPageToken: '2',
    });
    const second = await jsonOf(await manage('GET', '/models?limit=2&next_page_token=2'));
    // Store models are shown relative to the store: answers carry no server paths.
    expect(second.body).toEqual({ models: [{ modelName: 'iris', modelUrl: 'iris' }] });
  });

  it('scales workers up and down', async () => {
    expect(
      (await manage('PUT', '/models/am?min_worker=2&max_worker=2&synchronous=true')).status,
    ).toBe(200);
    const described = await jsonOf(await manage('GET', '/models/am'));
    const workers = (
      described.body as { workerGroups: { workers: { model?: { weights?: unknown } }[] }[] }[]
    )[0]!.workerGroups[0]!.workers;
    expect(workers).toHaveLength(2);
    // Both workers' ONNX Runtime sessions read the process's one copy of the weights.
    for (const worker of workers) {
      expect(worker.model?.weights).toMatchObject({ shared: true, bytes: expect.any(Number) });
    }
    expect(
      (await manage('PUT', '/models/am?min_worker=1&max_worker=1&synchronous=true')).status,
    ).toBe(200);
    expect((await manage('PUT', '/models/am?min_worker=3&max_worker=1')).status).toBe(400);
  });

  it('keeps versions, switches the default, and unregisters one version', async () => {
    expect(
      (await register(`url=${encodeURIComponent(store.addMul)}&model_name=am&model_version=2`))
        .status,
    ).toBe(200);
    expect(
      (await register(`url=${encodeURIComponent(store.addMul)}&model_name=am&model_version=2`))
        .status,
    ).toBe(400);
    expect((await manage('PUT', '/models/am/2/set-default')).status).toBe(200);
    expect(t.server.models.get('am').version).toBe('2');
    const both = await jsonOf(await manage('GET', '/models/am'));
    expect((both.body as unknown[]).length).toBe(2);
    expect((await manage('DELETE', '/models/am/2')).status).toBe(200);
    expect(t.server.models.get('am').version).toBe('');
    expect((await manage('DELETE', '/models/am')).status).toBe(200);
    const gone = await jsonOf(await manage('GET', '/models/am'));
    expect(gone.status).toBe(404);
    expect(
      (await fetch(`${t.inference}/predictions/am`, { method: 'POST', body: 'x' })).status,
    ).toBe(404);
  });

  it('serves the management OpenAPI description', async () => {
    const { body } = await jsonOf(await manage('GET', '/openapi.json'));
    expect(Object.keys((body as { paths: object }).paths)).toEqual(
      expect.arrayContaining(['/models', '/models/{model}', '/models/{model}/{version}']),
    );
  });
});

describe('secure defaults (ShellTorch)', () => {
  it.each([
    ['a remote URL', 'https://example.com/model.zip', 403],
    ['an s3 URL', 's3://bucket/model', 403],
    ['a path outside the store', '__OUTSIDE__', 403],
    ['a path escaping the store', '../outside', 403],
    ['a symlink out of the store', '__LINK__', 403],
    ['a missing model', 'missing-model', 404],
  ])('refuses %s', async (_label, url, status) => {
    const link = path.join(store.dir, 'sneaky');
    if (!fs.existsSync(link)) fs.symlinkSync(outside, link);
    const resolved = url === '__OUTSIDE__' ? outside : url === '__LINK__' ? 'sneaky' : url;
    const response = await jsonOf(await register(`url=${encodeURIComponent(resolved)}`));
    expect(response.status).toBe(status);
    expectCleanError(response.body);
  });

  it('refuses a hostile archive in the store and keeps serving', async () => {
    const evil = zipSync({
      '../../evil.txt': new TextEncoder().encode('owned'),
      'model.onnx': new Uint8Array(4),
    });
    fs.writeFileSync(path.join(store.dir, 'evil.zip'), evil);
    const response = await jsonOf(await register('url=evil.zip'));
    expect(response.status).toBe(400);
    expect(JSON.stringify(response.body)).toMatch(/unsafe|escape/i);
    expect(fs.existsSync(path.join(root, 'evil.txt'))).toBe(false);
    expect((await jsonOf(await fetch(`${t.inference}/ping`))).status).toBe(200);
  });

  it('refuses bad query values with 400', async () => {
    for (const query of [
      '',
      'url=iris&batch_size=0',
      'url=iris&min_worker=-1',
      'url=iris&synchronous=maybe',
    ]) {
      const { status, body } = await jsonOf(await register(query));
      expect(status).toBe(400);
      expectCleanError(body);
    }
  });

  it('will not switch token authorization off beyond loopback', async () => {
    const config = loadServerConfig({
      env: {},
      overrides: {
        inference_address: 'http://127.0.0.1:0',
        management_address: 'http://0.0.0.0:0',
        metrics_address: 'http://127.0.0.1:0',
        disable_token_authorization: 'true',
      },
    });
    await expect(startKilnServer({ config })).rejects.toMatchObject({ code: 'INVALID_CONFIG' });
  });

  it('requires the bearer token when one is configured', async () => {
    const guarded = await startTestServer({
      config: { management_token: 's3cret', model_store: store.dir },
    });
    try {
      const denied = await jsonOf(await fetch(`${guarded.management}/models`));
      expect(denied.status).toBe(401);
      expect(denied.headers.get('www-authenticate')).toBe('Bearer');
      expect(
        (
          await fetch(`${guarded.management}/models`, {
            headers: { authorization: 'Bearer wrong' },
          })
        ).status,
      ).toBe(401);
      expect(
        (
          await fetch(`${guarded.management}/models`, {
            headers: { authorization: 'Bearer s3cret' },
          })
        ).status,
      ).toBe(200);
    } finally {
      await guarded.stop();
    }
  });

  it('binds every listener to loopback by default', async () => {
    for (const url of [t.inference, t.management, t.metrics])
      expect(new URL(url).hostname).toBe('127.0.0.1');
    await sleep(0);
  });
});
