import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tensor, decodeNpy, encodeNpy } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

// DJL Serving's Python mode behind the real server: model.py + handle(inputs) over HTTP.
const { run } = await checkEngine('Python', () => {
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import numpy'], { stdio: 'ignore' });
    return Promise.resolve(null);
  } catch {
    return Promise.resolve('/usr/bin/python3 cannot import numpy (apt-get install python3-numpy)');
  }
});

const MODELS: Record<string, string> = {
  pid: `
import os, time
import numpy as np
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    time.sleep(0.2)
    return Output().add_as_numpy([np.array([os.getpid()], dtype=np.int32)], key="pid")
`,
  double: `
from djl_python import Input, Output
def handle(inputs: Input):
    if inputs.is_empty():
        return None
    return Output().add_as_numpy([inputs.get_as_numpy()[0] * 2], key="y")
`,
  failing: `
def handle(inputs):
    if not inputs.is_empty():
        raise RuntimeError("no cats today")
`,
  crashing: `
import os
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    x = inputs.get_as_numpy()[0]
    if x.flat[0] < 0:
        os._exit(1)
    return Output().add_as_numpy([x + 1], key="y")
`,
  hanging: `
import time
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    x = inputs.get_as_numpy()[0]
    if x.flat[0] < 0:
        time.sleep(60)
    return Output().add_as_numpy([x + 1], key="y")
`,
};

/** serving.properties lines beyond the interpreter, per model. */
const EXTRA_PROPERTIES: Record<string, string> = { hanging: 'option.predict_timeout=1\n' };

let t: TestServer;

beforeAll(async () => {
  if (!run) return;
  const root = tempDir('python-mode');
  const urls = Object.entries(MODELS).map(([name, source]) => {
    const dir = path.join(root, name);
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'model.py'), source);
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      'option.pythonExecutable=/usr/bin/python3\n' + (EXTRA_PROPERTIES[name] ?? ''),
    );
    return `${name}::Python=${dir}`;
  });
  t = await startTestServer({ models: urls });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

function infer(model: string, data: number[]): Promise<Response> {
  return fetch(`${t.inference}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, data.length], data }],
    }),
  });
}

describe.skipIf(!run)('Python mode over HTTP', () => {
  it('answers v2 infer from handle(inputs) with raw tensors', async () => {
    const { status, body } = await jsonOf(await infer('double', [1, 2.5, -3]));
    expect(status).toBe(200);
    const outputs = (body as { outputs: { name: string; shape: number[]; data: number[] }[] })
      .outputs;
    expect(outputs[0]).toMatchObject({ name: 'y', shape: [1, 3], data: [2, 5, -6] });
  });

  it('answers a raising handler with a clean 5xx JSON error, and keeps serving', async () => {
    const first = await jsonOf(await infer('failing', [1]));
    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(expectCleanError(first.body)).toContain('no cats today');
    expect((await infer('failing', [1])).status).toBeGreaterThanOrEqual(500);
  });

  it('fails the request of a crashed worker and serves the next one from a new process', async () => {
    const crashed = await jsonOf(await infer('crashing', [-1]));
    expect(crashed.status).toBeGreaterThanOrEqual(500);
    expectCleanError(crashed.body);
    const next = await jsonOf(await infer('crashing', [1]));
    expect(next.status).toBe(200);
    expect((next.body as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([2]);
  });

  it('times out a hung handler after option.predict_timeout and serves the next request', async () => {
    const hung = await jsonOf(await infer('hanging', [-1]));
    expect(hung.status).toBeGreaterThanOrEqual(500);
    expect(expectCleanError(hung.body)).toMatch(/did not answer within/);
    const next = await jsonOf(await infer('hanging', [1]));
    expect(next.body).not.toHaveProperty('error');
    expect(next.status).toBe(200);
    expect((next.body as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([2]);
  });

  it('answers /predictions with an npy body as npy', async () => {
    const body = encodeNpy(new Tensor('float32', new Float32Array([1, 2, 3]), [3]));
    const response = await fetch(`${t.inference}/predictions/double`, {
      method: 'POST',
      headers: { 'content-type': 'tensor/npy', accept: 'tensor/npy' },
      body,
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    expect(response.status, Buffer.from(bytes).toString()).toBe(200);
    const y = decodeNpy(bytes);
    expect(y.shape).toEqual([3]);
    expect([...(y.data as Float32Array)]).toEqual([2, 4, 6]);
  });

  it('scales Python processes up and down through the management API', async () => {
    const scale = (n: number) =>
      t.manage(`/models/pid?min_worker=${n}&max_worker=${n}&synchronous=true`, { method: 'PUT' });
    expect((await scale(2)).status).toBe(200);
    const pids = async () => {
      const answers = await Promise.all(
        Array.from({ length: 4 }, async () => {
          const { status, body } = await jsonOf(await infer('pid', [0]));
          expect(status).toBe(200);
          return (body as { outputs: { data: number[] }[] }).outputs[0]!.data[0]!;
        }),
      );
      return new Set(answers);
    };
    const two = await pids();
    expect(two.size).toBe(2);
    expect(two.has(process.pid)).toBe(false);
    expect((await scale(1)).status).toBe(200);
    const one = await pids();
    expect(one.size).toBe(1);
    const gone = [...two].filter((pid) => !one.has(pid));
    expect(gone).toHaveLength(1);
    // The retired worker's process has exited.
    for (let i = 0; i < 50 && gone.some(isAlive); i++) await new Promise((r) => setTimeout(r, 100));
    expect(gone.filter(isAlive)).toEqual([]);
  });
});

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
