import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CharTokenizer } from '@kiln/core';
import {
  checkPythonTorch,
  greedyAlone,
  writePythonStepModel,
} from '../support/python-step-model.js';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

// A Python step handler (a torch GRU) served with option.rolling_batch=auto: it streams
// through the same generation routes as an ONNX Runtime decoder, greedy as it runs alone.
let t: TestServer;
let root: string;
let reference: string;
const PROMPT = 'hello world';
const MAX_NEW_TOKENS = 16;

const { run } = await checkPythonTorch();

beforeAll(async () => {
  if (!run) return;
  root = tempDir('python-rolling-batch-http');
  const dir = writePythonStepModel(path.join(root, 'gru'), {
    'option.max_rolling_batch_size': '4',
  });
  const tokenizer = await CharTokenizer.fromFolder(dir);
  const [tokens] = await greedyAlone(dir, [tokenizer.encode(PROMPT)], MAX_NEW_TOKENS);
  expect(tokens).toHaveLength(MAX_NEW_TOKENS);
  reference = tokenizer.decode(tokens!);
  t = await startTestServer({ models: [`gru=${dir}`] });
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

/** The JSON payloads of a server-sent event stream, and whether it ended with [DONE]. */
async function events(
  response: Response,
): Promise<{ data: Record<string, unknown>[]; done: boolean }> {
  expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
  const chunks = (await response.text()).split('\n\n').filter(Boolean);
  const done = chunks.at(-1) === 'data: [DONE]';
  const data = chunks
    .filter((c) => c !== 'data: [DONE]')
    .map((c) => JSON.parse(c.slice('data: '.length)) as Record<string, unknown>);
  return { data, done };
}

describe.skipIf(!run)('a Python step handler under option.rolling_batch=auto', () => {
  const greedy = { max_new_tokens: MAX_NEW_TOKENS };

  it('is described as a step model', async () => {
    const described = await jsonOf(await t.manage('/models/gru'));
    expect((described.body as { workerKind: string }[])[0]!.workerKind).toBe('step');
  });

  it('answers /predictions as JSON, and as JSON lines token by token', async () => {
    const plain = await jsonOf(
      await post('/predictions/gru', { inputs: PROMPT, parameters: greedy }),
    );
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({
      generated_text: reference,
      details: { finish_reason: 'length', generated_tokens: MAX_NEW_TOKENS },
    });
    const streamed = await post('/predictions/gru', {
      inputs: PROMPT,
      parameters: greedy,
      stream: true,
    });
    expect(streamed.headers.get('content-type')).toMatch(/application\/jsonlines/);
    const lines = (await streamed.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { token: { text: string } | null; generated_text?: string });
    expect(lines).toHaveLength(MAX_NEW_TOKENS + 1);
    expect(
      lines
        .slice(0, -1)
        .map((l) => l.token?.text)
        .join(''),
    ).toBe(reference);
    expect(lines.at(-1)).toMatchObject({ generated_text: reference });
  });

  it('streams the v2 generate extension as server-sent events', async () => {
    const { data } = await events(
      await post('/v2/models/gru/generate_stream', { text_input: PROMPT, parameters: greedy }),
    );
    expect(data.map((d) => d.text_output).join('')).toBe(reference);
    expect(data.at(-1)).toMatchObject({ finish_reason: 'length' });
  });

  it('serves /v1/completions, streamed and not', async () => {
    const request = { model: 'gru', prompt: PROMPT, max_tokens: MAX_NEW_TOKENS, temperature: 0 };
    const plain = await jsonOf(await post('/v1/completions', request));
    expect(plain.body).toMatchObject({
      choices: [{ index: 0, text: reference, finish_reason: 'length' }],
      usage: { prompt_tokens: PROMPT.length, completion_tokens: MAX_NEW_TOKENS },
    });
    const streamed = await events(await post('/v1/completions', { ...request, stream: true }));
    expect(streamed.done).toBe(true);
    expect(streamed.data.map((d) => (d.choices as { text: string }[])[0]!.text).join('')).toBe(
      reference,
    );
  });

  it('decodes requests side by side as each decodes alone', async () => {
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        post('/predictions/gru', { inputs: PROMPT, parameters: greedy }).then(jsonOf),
      ),
    );
    for (const answer of answers) expect(answer.body).toMatchObject({ generated_text: reference });
  });
});
