import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel, tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

// Every model is a worker pool: a tensor model (forward workers), a Python handler (serve
// workers) and a text-generation model (step workers) are described, scaled and served the
// same way through the management API.
const PYTHON = '/usr/bin/python3';
const { run: python } = await checkEngine('Python', () => {
  try {
    execFileSync(PYTHON, ['-c', 'import numpy'], { stdio: 'ignore' });
    return Promise.resolve(null);
  } catch {
    return Promise.resolve(`${PYTHON} cannot import numpy (apt-get install python3-numpy)`);
  }
});

const ECHO_HANDLER = `
from djl_python import Input, Output

def handle(inputs: Input):
    if inputs.is_empty():
        return None
    return Output().add(inputs.get_as_bytes())
`;

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('one-path');
  const gpt = await gptDecoderModel(path.join(root, 'gpt'), {
    layers: 2,
    hidden: 32,
    heads: 2,
    maxLen: 256,
    // No end-of-text token: every generation runs to its length.
    vocab: defaultCharVocab().slice(1),
    properties: { 'option.max_rolling_batch_size': '4' },
  });
  const tiny = await tinyModel(path.join(root, 'tiny'));
  const models = [`gpt=${gpt.dir}`, `tiny=${tiny}`];
  if (python) {
    const echo = path.join(root, 'echo');
    fs.mkdirSync(echo);
    fs.writeFileSync(path.join(echo, 'model.py'), ECHO_HANDLER);
    fs.writeFileSync(path.join(echo, 'serving.properties'), 'engine=Python\n');
    models.push(`echo=${echo}`);
  }
  t = await startTestServer({ models });
  await t.settled();
}, 120_000);

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

type Description = Record<string, unknown> & {
  workerKind: string;
  workerGroups: { minWorkers: number; maxWorkers: number; workers: unknown[] }[];
};

async function describeModel(name: string): Promise<Description> {
  const { status, body } = await jsonOf(await t.manage(`/models/${name}`));
  expect(status, name).toBe(200);
  return (body as Description[])[0]!;
}

const scale = async (name: string, workers: number) =>
  (
    await t.manage(`/models/${name}?min_worker=${workers}&max_worker=${workers}&synchronous=true`, {
      method: 'PUT',
    })
  ).status;

const complete = async (prompt: string, stream: boolean) => {
  const response = await fetch(`${t.inference}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt', prompt, max_tokens: 40, temperature: 0, stream }),
  });
  const text = await response.text();
  return { status: response.status, text };
};

/** The completion text of an answer, streamed (server-sent events) or not. */
function completionText(answer: { text: string }, stream: boolean): string {
  if (!stream) return (JSON.parse(answer.text) as { choices: { text: string }[] }).choices[0]!.text;
  return answer.text
    .split('\n\n')
    .filter((e) => e.startsWith('data: {'))
    .map((e) => (JSON.parse(e.slice(6)) as { choices: { text: string }[] }).choices[0]!.text)
    .join('');
}

describe('one serving path for every kind of model', () => {
  it('describes tensor, Python and generative models with the same fields', async () => {
    const names = python ? ['tiny', 'gpt', 'echo'] : ['tiny', 'gpt'];
    const described = await Promise.all(names.map(describeModel));
    const kinds = described.map((d) => d.workerKind);
    expect(kinds).toEqual(python ? ['forward', 'step', 'serve'] : ['forward', 'step']);
    const fields = (d: Description) => Object.keys(d).sort();
    for (const [i, d] of described.entries()) {
      expect(fields(d), names[i]).toEqual(fields(described[0]!));
      expect(d.status, names[i]).toBe('Healthy');
      expect(d.workerGroups[0]!.workers.length, names[i]).toBeGreaterThanOrEqual(1);
    }
  });

  it('scales a generative model 1 → 2 → 1 workers while it answers completions and streams', async () => {
    const greedy = await complete('Hello, ', false);
    expect(greedy.status).toBe(200);
    const expected = completionText(greedy, false);
    expect(expected.length).toBeGreaterThan(0);

    let serving = true;
    const answers: { status: number; text: string; stream: boolean }[] = [];
    const clients = [false, true, false, true].map(async (stream) => {
      while (serving) answers.push({ ...(await complete('Hello, ', stream)), stream });
    });
    try {
      expect(await scale('gpt', 2)).toBe(200);
      expect((await describeModel('gpt')).workerGroups[0]!.workers).toHaveLength(2);
      expect(await scale('gpt', 1)).toBe(200);
      const after = (await describeModel('gpt')).workerGroups[0]!;
      expect(after).toMatchObject({ minWorkers: 1, maxWorkers: 1 });
    } finally {
      serving = false;
      await Promise.all(clients);
    }
    expect(answers.length).toBeGreaterThanOrEqual(4);
    expect(answers.some((a) => a.stream)).toBe(true);
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(200);
      // Greedy: every worker, old or new, answers as the first did.
      expect(completionText(answer, answer.stream)).toBe(expected);
    }
    // Still one worker's worth of service afterwards.
    expect(completionText(await complete('Hello, ', true), true)).toBe(expected);
  });

  it.skipIf(!python)('scales a Python model like any other', async () => {
    expect(await scale('echo', 2)).toBe(200);
    expect((await describeModel('echo')).workerGroups[0]!.workers).toHaveLength(2);
    const echoed = await fetch(`${t.inference}/predictions/echo`, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'ping',
    });
    expect(echoed.status).toBe(200);
    expect(await echoed.text()).toBe('ping');
    expect(await scale('echo', 1)).toBe(200);
  });
});
