import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkPythonTorch, writePythonStepModel } from '../support/python-step-model.js';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

// A Python step handler that chooses greedy tokens itself gives no logits: a request for
// log-probabilities is refused, never answered without them.
let t: TestServer;
let root: string;

const { run } = await checkPythonTorch();

beforeAll(async () => {
  if (!run) return;
  root = tempDir('python-logprobs');
  const dir = writePythonStepModel(path.join(root, 'choosing'), { 'option.choose_tokens': 'true' });
  t = await startTestServer({ models: [`choosing=${dir}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
});

const post = (route: string, body: unknown) =>
  fetch(`${t.inference}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe.skipIf(!run)('log-probabilities of a step handler that chooses its tokens', () => {
  it('refuses them with a clear 400, streamed or not, and still serves without them', async () => {
    const request = { model: 'choosing', prompt: 'hello', max_tokens: 4, temperature: 0 };
    for (const stream of [false, true]) {
      const refused = await jsonOf(
        await post('/v1/completions', { ...request, logprobs: 2, stream }),
      );
      expect(refused.status).toBe(400);
      expect(expectCleanError(refused.body)).toMatch(/gives no log-probabilities/);
    }
    const served = await jsonOf(await post('/v1/completions', request));
    expect(served.status).toBe(200);
    expect(served.body).toMatchObject({ choices: [{ logprobs: null, finish_reason: 'length' }] });
  });
});
