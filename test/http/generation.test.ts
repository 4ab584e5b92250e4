import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel, tinyModel } from '@kiln/model-tools';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  sleep,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('generation');
  // No end-of-text token, so that every generation runs to its length or stop string.
  const gpt = await gptDecoderModel(path.join(root, 'gpt'), {
    layers: 2,
    hidden: 32,
    heads: 2,
    maxLen: 512,
    vocab: defaultCharVocab().slice(1),
    properties: { 'option.max_rolling_batch_size': '4' },
  });
  const tiny = await tinyModel(path.join(root, 'tiny'));
  t = await startTestServer({ models: [`gpt=${gpt.dir}`, `tiny=${tiny}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const post = (route: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${t.inference}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
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
    .map((c) => {
      expect(c.startsWith('data: ')).toBe(true);
      return JSON.parse(c.slice(6)) as Record<string, unknown>;
    });
  return { data, done };
}

/** A POST on a connection of its own, never one kept alive from an earlier request. */
function postOnFreshConnection(
  route: string,
  body: unknown,
): Promise<{ status: number; body: unknown; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${t.inference}${route}`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(text) as unknown,
            connection: res.headers.connection,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${t.metrics}/metrics`)).text();
  const match = new RegExp(`^${name}\\{model="gpt"\\} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : NaN;
}

describe('text generation over HTTP', () => {
  const greedy = { max_new_tokens: 24 };
  let reference: string;

  it('answers DJL LMI requests as JSON, and as JSON lines token by token when streamed', async () => {
    const plain = await jsonOf(
      await post('/predictions/gpt', { inputs: 'Hello, ', parameters: greedy }),
    );
    expect(plain.status).toBe(200);
    const body = plain.body as { generated_text: string; details: Record<string, unknown> };
    reference = body.generated_text;
    expect([...reference]).toHaveLength(24);
    expect(body.details).toMatchObject({
      finish_reason: 'length',
      generated_tokens: 24,
      prompt_tokens: 7,
    });

    const streamed = await post('/predictions/gpt', {
      inputs: 'Hello, ',
      parameters: greedy,
      stream: true,
    });
    expect(streamed.headers.get('content-type')).toMatch(/application\/jsonlines/);
    const lines = (await streamed.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { token: { text: string } | null });
    expect(lines).toHaveLength(25);
    expect(
      lines
        .slice(0, -1)
        .map((l) => l.token?.text)
        .join(''),
    ).toBe(reference);
    expect(lines.at(-1)).toMatchObject({
      generated_text: reference,
      details: { finish_reason: 'length' },
    });
  });

  it('serves the v2 generate extension, plain and as server-sent events', async () => {
    const plain = await jsonOf(
      await post('/v2/models/gpt/generate', { text_input: 'Hello, ', max_tokens: 24 }),
    );
    expect(plain.body).toMatchObject({
      model_name: 'gpt',
      text_output: reference,
      finish_reason: 'length',
    });
    const { data } = await events(
      await post('/v2/models/gpt/generate_stream', { text_input: 'Hello, ', parameters: greedy }),
    );
    expect(data.map((d) => d.text_output).join('')).toBe(reference);
    expect(data.at(-1)).toMatchObject({ finish_reason: 'length' });
  });

  it('serves OpenAI completions and chat completions, streamed or not', async () => {
    const request = { model: 'gpt', prompt: 'Hello, ', max_tokens: 24, temperature: 0 };
    const plain = await jsonOf(await post('/v1/completions', request));
    expect(plain.body).toMatchObject({
      object: 'text_completion',
      model: 'gpt',
      choices: [{ index: 0, text: reference, finish_reason: 'length' }],
      usage: { prompt_tokens: 7, completion_tokens: 24, total_tokens: 31 },
    });
    const streamed = await events(await post('/v1/completions', { ...request, stream: true }));
    expect(streamed.done).toBe(true);
    expect(streamed.data.map((d) => (d.choices as { text: string }[])[0]!.text).join('')).toBe(
      reference,
    );

    const chat = {
      model: 'gpt',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 10,
      temperature: 0,
    };
    const answer = await jsonOf(await post('/v1/chat/completions', chat));
    const content = (answer.body as { choices: { message: { content: string } }[] }).choices[0]!
      .message.content;
    expect(answer.body).toMatchObject({
      object: 'chat.completion',
      choices: [{ message: { role: 'assistant' } }],
    });
    expect([...content]).toHaveLength(10);
    const chunks = await events(await post('/v1/chat/completions', { ...chat, stream: true }));
    expect(chunks.done).toBe(true);
    const deltas = chunks.data.map(
      (d) => (d.choices as { delta: { role?: string; content?: string } }[])[0]!.delta,
    );
    expect(deltas[0]!.role).toBe('assistant');
    expect(deltas.map((d) => d.content ?? '').join('')).toBe(content);
    expect(chunks.data.at(-1)).toMatchObject({
      object: 'chat.completion.chunk',
      choices: [{ finish_reason: 'length' }],
    });

    const models = await jsonOf(await fetch(`${t.inference}/v1/models`));
    expect((models.body as { data: { id: string }[] }).data.map((m) => m.id)).toEqual(['gpt']);
  });

  it('stops at a stop string, and repeats seeded samples whatever runs beside them', async () => {
    const stop = reference.slice(5, 7);
    const stopped = await jsonOf(
      await post('/predictions/gpt', {
        inputs: 'Hello, ',
        parameters: { ...greedy, stop: [stop] },
      }),
    );
    expect(stopped.body).toMatchObject({
      generated_text: reference.slice(0, reference.indexOf(stop)),
      details: { finish_reason: 'stop' },
    });

    const sampled = {
      inputs: 'Once',
      parameters: { max_new_tokens: 30, do_sample: true, top_k: 40, seed: 11 },
    };
    const alone = await jsonOf(await post('/predictions/gpt', sampled));
    const crowd = await Promise.all([
      post('/predictions/gpt', sampled),
      ...Array.from({ length: 5 }, (_, i) =>
        post('/predictions/gpt', {
          inputs: `x${i}`,
          parameters: { max_new_tokens: 20 + i, do_sample: true },
        }),
      ),
    ]);
    expect((await jsonOf(crowd[0]!)).body).toEqual(alone.body);
  });

  it('frees the slot of a client that disconnects mid-stream', async () => {
    const tokensBefore = await metric('kiln_generation_tokens_total');
    const controller = new AbortController();
    const response = await fetch(`${t.inference}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', prompt: 'a', max_tokens: 500, stream: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    const pool = t.server.models.generationPool('gpt', undefined);
    for (let i = 0; i < 200 && pool.generation().active > 0; i++) await sleep(10);
    expect(pool.generation()).toMatchObject({ active: 0, waiting: 0, cacheTokensReserved: 0 });
    expect(await metric('kiln_generation_active_sequences')).toBe(0);
    // It stopped well before its 500 tokens.
    expect(await metric('kiln_generation_tokens_total')).toBeLessThan(tokensBefore + 500);
    // And the model keeps serving.
    expect((await post('/predictions/gpt', { inputs: 'Hello, ', parameters: greedy })).status).toBe(
      200,
    );
  });

  it('reports time to first token, inter-token latency, tokens and cache use', async () => {
    const text = await (await fetch(`${t.metrics}/metrics`)).text();
    for (const name of [
      'kiln_generation_time_to_first_token_seconds_count',
      'kiln_generation_inter_token_seconds_count',
      'kiln_generation_tokens_total',
    ])
      expect(await metric(name), name).toBeGreaterThan(0);
    expect(text).toMatch(/^kiln_generation_kv_cache_bytes\{model="gpt"\} 0$/m);
    expect(text).toMatch(/^kiln_generation_waiting_sequences\{model="gpt"\} 0$/m);
  });

  it('refuses bad requests with a clear JSON error before any stream starts', async () => {
    const outside = await jsonOf(await post('/predictions/gpt', { inputs: 'héllo', stream: true }));
    expect(outside.status).toBe(400);
    expect(expectCleanError(outside.body)).toMatch(/not in the model's vocabulary/);
    const tooLong = await jsonOf(
      await post('/v1/completions', { model: 'gpt', prompt: 'a', max_tokens: 600, stream: true }),
    );
    expect(tooLong.status).toBe(400);
    expect(expectCleanError(tooLong.body)).toMatch(/exceeds the model's limit of 512 tokens/);
    const badTopP = await jsonOf(
      await post('/v2/models/gpt/generate_stream', {
        text_input: 'a',
        parameters: { do_sample: true, top_p: 3 },
      }),
    );
    expect(badTopP.status).toBe(400);
    expect(expectCleanError(badTopP.body)).toMatch(/top_p/);
    const notJson = await fetch(`${t.inference}/v1/chat/completions`, {
      method: 'POST',
      body: '{',
    });
    expect(notJson.status).toBe(400);
    const notGenerative = await jsonOf(await post('/v2/models/tiny/generate', { text_input: 'a' }));
    expect(notGenerative.status).toBe(400);
    expect(expectCleanError(notGenerative.body)).toMatch(/does not generate text/);
    // Tensor predictions for other models still reach the inference routes.
    const tiny = await post('/predictions/tiny', [[1, 2, 3, 4]]);
    expect(tiny.status).toBe(200);
  });

  // Last: it stops the server.
  it('answers accepted generations in full when the server stops, and refuses new ones', async () => {
    const accepted = post('/predictions/gpt', { inputs: 'a', parameters: { max_new_tokens: 200 } });
    const pool = t.server.models.generationPool('gpt', undefined);
    for (let i = 0; i < 200 && pool.generation().active === 0; i++) await sleep(5);
    const stopping = t.stop();
    // On fresh connections: the drain closes idle keep-alive ones, so a pooled one may be gone.
    for (const [route, body] of [
      ['/v1/completions', { model: 'gpt', prompt: 'a' }],
      ['/predictions/gpt', { inputs: 'a' }],
    ] as const) {
      const late = await postOnFreshConnection(route, body);
      expect(late.status, route).toBe(503);
      expect(late.connection).toBe('close');
      expectCleanError(late.body);
    }
    await stopping;
    const answer = await jsonOf(await accepted);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      details: { finish_reason: 'length', generated_tokens: 200 },
    });
  });
});
