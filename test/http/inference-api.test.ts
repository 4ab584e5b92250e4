import fs from 'node:fs';
import path from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  NDList,
  Tensor,
  decodeTensors,
  encodeNpy,
  encodeNpz,
  encodeNDList,
  encodeSafetensors,
} from '@kiln/core';
import { buildImageModel, buildModelStore, type ModelStore } from '../support/fixtures.js';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

let store: ModelStore;
let image: string;
let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('inference-api');
  store = await buildModelStore(path.join(root, 'store'));
  image = await buildImageModel(path.join(root, 'image'));
  t = await startTestServer({
    models: [`iris=${store.iris}`, `addmul=${store.addMul}`, `image=${image}`],
  });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const a = new Float32Array([1, 2, 3, 4, 5, 6]);
const b = new Float32Array([0.5, 0.5, 0.5, 2, 2, 2]);
const addMulInputs = () =>
  NDList.of(new Tensor('float32', a, [2, 3], 'a'), new Tensor('float32', b, [2, 3], 'b'));
const expectAddMul = (list: NDList) => {
  expect(Array.from(list.get('sum').data as Float32Array)).toEqual([1.5, 2.5, 3.5, 6, 7, 8]);
  expect(Array.from(list.get('product').data as Float32Array)).toEqual([0.5, 1, 1.5, 8, 10, 12]);
};
const post = (
  route: string,
  body: NonNullable<RequestInit['body']>,
  headers: Record<string, string> = {},
) => fetch(`${t.inference}${route}`, { method: 'POST', body, headers });

describe('GET /ping', () => {
  it('reports every model Healthy with 200', async () => {
    const { status, body } = await jsonOf(await fetch(`${t.inference}/ping`));
    expect(status).toBe(200);
    expect(body).toEqual({
      iris: { status: 'Healthy' },
      addmul: { status: 'Healthy' },
      image: { status: 'Healthy' },
    });
  });
});

describe('POST /predictions/{model}', () => {
  it('answers the demo model with ranked Iris classes', async () => {
    const { status, body } = await jsonOf(
      await post('/predictions/iris', '[6.7, 3.0, 5.2, 2.3]', {
        'content-type': 'application/json',
      }),
    );
    expect(status).toBe(200);
    const ranked = body as { className: string; probability: number }[];
    expect(ranked[0]!.className).toBe('virginica');
    expect(ranked.map((r) => r.className).sort()).toEqual(['setosa', 'versicolor', 'virginica']);
    expect(ranked.reduce((s, r) => s + r.probability, 0)).toBeCloseTo(1, 5);
  });

  it('takes a numpy .npz body (Content-Type tensor/npz, as in DJL Serving docs) and answers npz by Accept', async () => {
    const response = await post('/predictions/addmul', Buffer.from(encodeNpz(addMulInputs())), {
      'content-type': 'tensor/npz',
      accept: 'tensor/npz',
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('tensor/npz');
    expectAddMul(decodeTensors(new Uint8Array(await response.arrayBuffer())));
  });

  it.each([
    ['safetensors', (l: NDList) => encodeSafetensors(l), 'tensor/safetensors'],
    ['ndlist', (l: NDList) => encodeNDList(l), 'tensor/ndlist'],
    [
      'json',
      (l: NDList) =>
        new TextEncoder().encode(
          JSON.stringify({
            inputs: l.tensors.map((x) => ({
              name: x.name,
              shape: x.shape,
              datatype: 'FP32',
              data: Array.from(x.data as Float32Array),
            })),
          }),
        ),
      'application/json',
    ],
  ])('takes a %s body detected from its first bytes', async (_label, encode, accept) => {
    const response = await post('/predictions/addmul', Buffer.from(encode(addMulInputs())), {
      accept,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain(accept);
    const bytes = new Uint8Array(await response.arrayBuffer());
    expectAddMul(decodeTensors(bytes, { contentType: accept }));
  });

  it('answers DJL ndlist when no Accept is given', async () => {
    const plain = await post('/predictions/addmul', Buffer.from(encodeNpz(addMulInputs())));
    expect(plain.headers.get('content-type')).toContain('tensor/ndlist');
    expectAddMul(decodeTensors(new Uint8Array(await plain.arrayBuffer())));
  });

  it('takes multipart/form-data with one tensor part per input', async () => {
    const form = new FormData();
    form.append(
      'a',
      new Blob([encodeNpy(new Tensor('float32', a, [2, 3]))], { type: 'tensor/npy' }),
      'a.npy',
    );
    form.append(
      'b',
      new Blob([encodeNpy(new Tensor('float32', b, [2, 3]))], { type: 'tensor/npy' }),
      'b.npy',
    );
    const response = await fetch(`${t.inference}/predictions/addmul`, {
      method: 'POST',
      body: form,
      headers: { accept: 'tensor/npz' },
    });
    expect(response.status).toBe(200);
    expectAddMul(decodeTensors(new Uint8Array(await response.arrayBuffer())));
  });

  it('classifies an image body (curl --data-binary @image.png) with labels from synset.txt', async () => {
    const png = new PNG({ width: 64, height: 48 });
    for (let i = 0; i < png.data.length; i += 4) png.data.set([200, (i / 4) % 255, 30, 255], i);
    const response = await post('/predictions/image', PNG.sync.write(png), {
      'content-type': 'image/png',
    });
    const { status, body } = await jsonOf(response);
    expect(status).toBe(200);
    const top = body as { className: string; probability: number }[];
    expect(top).toHaveLength(3);
    for (const entry of top)
      expect(['cat', 'dog', 'fish', 'bird', 'frog']).toContain(entry.className);
    expect(top[0]!.probability).toBeGreaterThanOrEqual(top[1]!.probability);
  });

  it('serves a version path and refuses an unknown version with 404', async () => {
    expect(
      (await post('/predictions/addmul/v9', Buffer.from(encodeNpz(addMulInputs())))).status,
    ).toBe(404);
  });
});

describe('POST /invocations', () => {
  it('needs model_name when several models are served, then predicts', async () => {
    const missing = await jsonOf(
      await post('/invocations', '[5.1,3.5,1.4,0.2]', { 'content-type': 'application/json' }),
    );
    expect(missing.status).toBe(400);
    const named = await jsonOf(
      await post('/invocations?model_name=iris', '[5.1,3.5,1.4,0.2]', {
        'content-type': 'application/json',
      }),
    );
    expect(named.status).toBe(200);
    expect((named.body as { className: string }[])[0]!.className).toBe('setosa');
  });
});

describe('OpenAPI', () => {
  it('describes every inference route', async () => {
    const { status, body } = await jsonOf(await fetch(`${t.inference}/openapi.json`));
    expect(status).toBe(200);
    const paths = Object.keys((body as { paths: Record<string, unknown> }).paths);
    for (const route of [
      '/ping',
      '/predictions/{model}',
      '/invocations',
      '/v2/models/{model}/infer',
      '/v2/health/ready',
    ])
      expect(paths).toContain(route);
  });
});
