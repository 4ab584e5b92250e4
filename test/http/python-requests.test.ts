import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkEngine } from '@kiln/testing';
import { v2GrpcClient } from '../support/grpc-client.js';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

// What reaches a Python handler from an HTTP request, as DJL Serving's RequestParser makes its
// Input: query parameters as contents, form fields under their names; how a 600 kB body is
// written to its worker (once); and which timeout bounds a worker's loading.
const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () =>
  Promise.resolve(fs.existsSync(PYTHON) ? null : `${PYTHON} is absent`),
);

// Answers each content's name and size, the first bytes of text ones.
const CONTENTS = `
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    names = inputs.get_content().get_keys()
    values = inputs.get_content().get_values()
    return Output().add_as_json([[n, len(v), bytes(v[:8]).decode("latin1")] for n, v in zip(names, values)])
`;

const DOUBLE = `
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add_as_numpy([x * 2 for x in inputs.get_as_numpy()])
`;

const SLOW_LOAD = `
import time
time.sleep(30)
def handle(inputs):
    return None
`;

const ELEMENTS = 150_000; // 600 kB of float32
let t: TestServer;

beforeAll(async () => {
  if (!run) return;
  const root = tempDir('python-requests');
  const models: Record<string, [string, string]> = {
    contents: [CONTENTS, ''],
    socket: [CONTENTS, 'option.sharedMemory=false\n'],
    slow: [SLOW_LOAD, 'option.model_loading_timeout=1\n'],
    double: [DOUBLE, ''],
  };
  const urls = Object.entries(models).map(([name, [source, properties]]) => {
    const dir = path.join(root, name);
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'model.py'), source);
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      `option.pythonExecutable=${PYTHON}\n${properties}`,
    );
    return `${name}::Python=${dir}`;
  });
  t = await startTestServer({ models: urls, config: { grpc_address: '127.0.0.1:0' } });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

async function contentsOf(response: Response): Promise<unknown> {
  const { status, body } = await jsonOf(response);
  expect(status).toBe(200);
  return body;
}

describe.skipIf(!run)('Python mode: what an HTTP request hands the handler', () => {
  it('adds each query parameter as a content named by its key, before the body', async () => {
    const response = await fetch(
      `${t.inference}/predictions/contents?exception=boom&stream=true&stream=false`,
      { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' },
    );
    expect(await contentsOf(response)).toEqual([
      ['exception', 4, 'boom'],
      ['stream', 4, 'true'],
      ['stream', 5, 'false'],
      ['data', 5, 'hello'],
    ]);
  });

  it('keeps a single multipart form field under its own name, and each of several', async () => {
    const one = new FormData();
    one.append('exception', 'boom');
    expect(
      await contentsOf(
        await fetch(`${t.inference}/predictions/contents`, { method: 'POST', body: one }),
      ),
    ).toEqual([['exception', 4, 'boom']]);
    const two = new FormData();
    two.append('image', new Blob([new Uint8Array(5)]), 'x.png');
    two.append('meta', '{"a":1}');
    const [query, ...parts] = (await contentsOf(
      await fetch(`${t.inference}/predictions/contents?k=v`, { method: 'POST', body: two }),
    )) as [string, number, string][];
    expect(query).toEqual(['k', 1, 'v']);
    // Each part under its field's name (in the order the server finished reading them).
    expect(parts.sort()).toEqual([
      ['image', 5, '\0\0\0\0\0'],
      ['meta', 7, '{"a":1}'],
    ]);
  });

  it('writes a 600 kB body to its worker once: into shared memory, or in one socket write', async () => {
    const calls: { model: string; socketBytes: number; sharedBytes: number }[] = [];
    const listen = (message: unknown) => calls.push(message as (typeof calls)[number]);
    subscribe('kiln:python:call', listen);
    try {
      const body = new Uint8Array(new Float32Array(ELEMENTS).fill(1).buffer);
      for (const model of ['contents', 'socket']) {
        const answer = await contentsOf(
          await fetch(`${t.inference}/predictions/${model}`, {
            method: 'POST',
            headers: { 'content-type': 'application/octet-stream' },
            body,
          }),
        );
        expect((answer as [string, number][])[0]!.slice(0, 2)).toEqual(['data', ELEMENTS * 4]);
      }
    } finally {
      unsubscribe('kiln:python:call', listen);
    }
    const [shared, socket] = ['contents', 'socket'].map((m) => calls.find((c) => c.model === m)!);
    // Shared memory: the body's bytes copied there once; the socket carries only the frame's head.
    expect(shared!.sharedBytes).toBe(ELEMENTS * 4);
    expect(shared!.socketBytes).toBeLessThan(2048);
    // Over the socket: the body leaves from its own buffer in the call's one writev.
    expect(socket!.sharedBytes).toBe(0);
    expect(socket!.socketBytes - ELEMENTS * 4).toBeGreaterThan(0);
    expect(socket!.socketBytes - ELEMENTS * 4).toBeLessThan(2048);
  });

  it('answers a gRPC ModelInfer, decoded and encoded in the serve worker', async () => {
    const grpc = v2GrpcClient(t.server.urls.grpc!);
    try {
      const reply = await grpc.call<{ model_name: string; raw_output_contents: Buffer[] }>(
        'ModelInfer',
        {
          model_name: 'double',
          inputs: [
            { name: 'x', datatype: 'FP32', shape: [2], contents: { fp32_contents: [1, 2.5] } },
          ],
        },
      );
      expect(reply.model_name).toBe('double');
      const [out] = reply.raw_output_contents;
      expect([
        ...new Float32Array(out!.buffer.slice(out!.byteOffset, out!.byteOffset + 8)),
      ]).toEqual([2, 5]);
      // Raw contents at every offset past alignment (the id's length moves them): the values
      // arrive intact, moved or not.
      const raw = Buffer.from(Float32Array.of(1, 2.5, -3, 4).buffer);
      for (let pad = 0; pad < 4; pad++) {
        const moved = await grpc.call<{ raw_output_contents: Buffer[] }>('ModelInfer', {
          model_name: 'double',
          id: 'i'.repeat(pad),
          inputs: [{ name: 'x', datatype: 'FP32', shape: [4] }],
          raw_input_contents: [raw],
        });
        const [doubled] = moved.raw_output_contents;
        expect([
          ...new Float32Array(doubled!.buffer.slice(doubled!.byteOffset, doubled!.byteOffset + 16)),
        ]).toEqual([2, 5, -6, 8]);
      }
    } finally {
      grpc.close();
    }
  });

  it("bounds a worker's loading by option.model_loading_timeout (the pool's start timeout)", async () => {
    let described: { status: string; error?: string } | undefined;
    for (let i = 0; i < 200; i++) {
      [described] = (await (await t.manage('/models/slow')).json()) as (typeof described)[];
      if (described?.status === 'FAILED') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(described!.status).toBe('FAILED');
    expect(described!.error).toMatch(/not ready after 1000 ms/);
  });
});
