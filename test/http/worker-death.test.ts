// Issue #34: one request that kills its worker (a thread that exits, a Python process that
// exits) used to fail every request batched with it. The batch now runs again, each request
// alone on a fresh worker: only the killer is answered 500.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KILLER_FILE, KILL_WORKER } from '../support/worker-killer-engine.js';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

const hasPython = (() => {
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import numpy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

// Each request of a batch answers its own x + 1; a negative x ends the process at once.
const PYTHON_KILLER = `
import os
from djl_python import Input, Output

def answer(item):
    x = item.get_as_json()["x"]
    if x < 0:
        os._exit(1)
    return {"y": x + 1}

def handle(inputs: Input):
    if inputs.is_empty():
        return None
    if not inputs.is_batch():
        return Output().add_as_json(answer(inputs))
    out = Output()
    for i, item in enumerate(inputs.get_batches()):
        out.add_as_json(answer(item), batch_index=i)
    return out
`;

const INNOCENT = 12;
const KILLER_AT = 6;

let t: TestServer;

beforeAll(async () => {
  const root = tempDir('worker-death');
  const killer = path.join(root, 'killer');
  fs.mkdirSync(killer);
  fs.writeFileSync(path.join(killer, KILLER_FILE), '');
  // No batch size: the server's default, adaptive batching (the model has a batch axis).
  fs.writeFileSync(
    path.join(killer, 'serving.properties'),
    'engine=WorkerKiller\nplacement=thread\n',
  );
  const models = [`killer=${killer}`];
  if (hasPython) {
    const python = path.join(root, 'pykiller');
    fs.mkdirSync(python);
    fs.writeFileSync(path.join(python, 'model.py'), PYTHON_KILLER);
    // Python mode batches only when asked to (DJL's batch_size).
    fs.writeFileSync(
      path.join(python, 'serving.properties'),
      'option.pythonExecutable=/usr/bin/python3\nbatch_size=16\nmax_batch_delay=300\n',
    );
    models.push(`pykiller::Python=${python}`);
  }
  t = await startTestServer({
    models,
    engineModules: [
      pathToFileURL(path.resolve('support/worker-killer-engine.ts')).href,
      '@kiln/engine-python/provider',
    ],
  });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

function infer(data: number): Promise<Response> {
  return fetch(`${t.inference}/v2/models/killer/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [data] }],
    }),
  });
}

function predictPython(x: number): Promise<Response> {
  return fetch(`${t.inference}/predictions/pykiller`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ x }),
  });
}

/** INNOCENT requests with a killer among them, all at once: [status, body] of each. */
async function burst(
  send: (x: number) => Promise<Response>,
  killer: number,
): Promise<{ status: number; body: unknown }[]> {
  return Promise.all(
    Array.from({ length: INNOCENT + 1 }, async (_, i) =>
      jsonOf(await send(i === KILLER_AT ? killer : i)),
    ),
  );
}

/**
 * A 500 whose JSON body names the worker's death, without a stack trace: `{error}` on v2
 * routes, `{code, type, message}` on DJL's.
 */
function expectKillerAnswered(answer: { status: number; body: unknown }, death: RegExp): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(500);
  expectCleanError(answer.body);
  const body = answer.body as { error?: string; type?: string; message?: string };
  if (body.error === undefined) expect(body.type).toBe('WorkerCrashed');
  expect(body.error ?? body.message).toMatch(death);
}

describe('a request that kills its worker', () => {
  it('fails alone under adaptive batching, and the model serves on', async () => {
    const described = await jsonOf(await t.manage('/models/killer'));
    expect(JSON.stringify(described.body)).toMatch(/"batchSize":32\b/);
    for (let round = 0; round < 2; round++) {
      const answers = await burst(infer, KILL_WORKER);
      answers.forEach((answer, i) => {
        if (i === KILLER_AT) return;
        expect(answer.status, `request ${i}: ${JSON.stringify(answer.body)}`).toBe(200);
        const outputs = (answer.body as { outputs: { data: number[] }[] }).outputs;
        expect(outputs[0]!.data).toEqual([i + 1]);
      });
      expectKillerAnswered(answers[KILLER_AT]!, /killer cpu worker \d+ crashed: its thread exited/);
    }
    expect((await infer(1)).status).toBe(200);
  });

  it.skipIf(!hasPython)('fails alone in a Python batch whose process exits', async () => {
    const answers = await burst(predictPython, -1);
    answers.forEach((answer, i) => {
      if (i === KILLER_AT) return;
      expect(answer.status, `request ${i}: ${JSON.stringify(answer.body)}`).toBe(200);
      expect(answer.body).toEqual({ y: i + 1 });
    });
    expectKillerAnswered(answers[KILLER_AT]!, /Python worker of pykiller exited/);
    expect((await predictPython(1)).status).toBe(200);
  });
});
