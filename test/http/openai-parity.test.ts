import fs from 'node:fs';
import path from 'node:path';
import OpenAI, { APIError, BadRequestError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel } from '@kiln/model-tools';
import { loadTextTokenizer, logSoftmaxAt } from '@kiln/core';
import { loadOrtStepDecoder } from '@kiln/engine-onnxruntime';
import { type TestServer, sleep, startTestServer, tempDir } from '../support/server-harness.js';

let t: TestServer;
let root: string;
let modelDir: string;

beforeAll(async () => {
  root = tempDir('openai-parity');
  // No end-of-text token: every generation runs to its length or a stop string.
  const gpt = await gptDecoderModel(path.join(root, 'gpt'), {
    layers: 1,
    hidden: 32,
    heads: 2,
    maxLen: 128,
    vocab: defaultCharVocab().slice(1),
    properties: { 'option.max_rolling_batch_size': '4' },
  });
  modelDir = gpt.dir;
  t = await startTestServer({ models: [`gpt=${gpt.dir}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const client = () => new OpenAI({ baseURL: `${t.inference}/v1`, apiKey: 'unused', maxRetries: 0 });

/** The error the client throws for a request that must fail. */
async function clientError(call: Promise<unknown>): Promise<APIError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(APIError);
  return error as APIError;
}

/**
 * The model's log-softmax after the prompt and after each of `tokens`, computed by the decoder
 * alone on this thread: what the server's log-probabilities must equal.
 */
async function referenceLogSoftmax(prompt: string, tokenTexts: readonly string[]) {
  const tokenizer = await loadTextTokenizer(modelDir);
  // One character a token in this vocabulary.
  const tokens = tokenTexts.map((text) => {
    const [id, ...more] = tokenizer.encode(text);
    expect(more).toEqual([]);
    return id!;
  });
  const decoder = await loadOrtStepDecoder(modelDir, { session: { intraOpNumThreads: 1 } });
  try {
    const state = decoder.open();
    const steps: Float64Array[] = [];
    for (const fed of [tokenizer.encode(prompt), ...tokens.slice(0, -1).map((x) => [x])]) {
      const [logits] = await decoder.step([{ state, tokens: fed }]);
      const scores = logits as Float32Array;
      steps.push(Float64Array.from(scores, (_, i) => logSoftmaxAt(scores, i)));
    }
    decoder.release(state);
    return { steps, tokens, idOf: (text: string) => tokenizer.encode(text)[0]! };
  } finally {
    await decoder.close?.();
  }
}

/** Token ids of `k` most likely, by a full sort (ties: lower id first). */
const ranked = (logprobs: Float64Array, k: number) =>
  Array.from(logprobs.keys())
    .sort((a, b) => logprobs[b]! - logprobs[a]! || a - b)
    .slice(0, k);

describe('OpenAI parity with the official openai client', () => {
  it('lists the text-generation models and retrieves one; an unknown one is a 404', async () => {
    const list = await client().models.list();
    expect(list.data.map((m) => m.id)).toEqual(['gpt']);
    expect(await client().models.retrieve('gpt')).toMatchObject({
      id: 'gpt',
      object: 'model',
      owned_by: 'kiln',
      created: expect.any(Number),
    });
    const missing = await clientError(client().models.retrieve('nope'));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ status: 404, param: 'model', code: 'model_not_found' });
  });

  it('answers n greedy choices, identical, each with its index, and usage for them all', async () => {
    const answer = await client().completions.create({
      model: 'gpt',
      prompt: 'Hello',
      max_tokens: 8,
      temperature: 0,
      n: 3,
    });
    expect(answer.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(new Set(answer.choices.map((c) => c.text)).size).toBe(1);
    expect(answer.choices[0]!.text).toHaveLength(8);
    expect(answer.usage).toEqual({ prompt_tokens: 5, completion_tokens: 24, total_tokens: 29 });
  });

  it('repeats seeded choices: choice i is the single choice of seed + i', async () => {
    const ask = (n: number, seed: number) =>
      client().chat.completions.create({
        model: 'gpt',
        messages: [{ role: 'user', content: 'Once' }],
        max_completion_tokens: 12,
        temperature: 1,
        n,
        seed,
      });
    const [three, again, first, second] = await Promise.all([
      ask(3, 40),
      ask(3, 40),
      ask(1, 40),
      ask(1, 41),
    ]);
    const texts = (a: typeof three) => a.choices.map((c) => c.message.content);
    expect(texts(again)).toEqual(texts(three));
    expect(texts(three)[0]).toBe(first.choices[0]!.message.content);
    expect(texts(three)[1]).toBe(second.choices[0]!.message.content);
    expect(three.usage?.completion_tokens).toBe(36);
  });

  it('streams n choices interleaved, tagged by index, then a usage chunk when asked', async () => {
    const request = { model: 'gpt', prompt: 'abc', max_tokens: 10, temperature: 0, n: 2 };
    const plain = await client().completions.create(request);
    const stream = await client().completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    const texts = ['', ''];
    const finishes: (string | null)[] = [null, null];
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    for (const chunk of chunks.slice(0, -1)) {
      expect(chunk.choices).toHaveLength(1);
      const choice = chunk.choices[0]!;
      texts[choice.index] += choice.text;
      if (choice.finish_reason) finishes[choice.index] = choice.finish_reason;
      expect(chunk.usage ?? undefined).toBeUndefined();
    }
    expect(texts).toEqual(plain.choices.map((c) => c.text));
    expect(finishes).toEqual(['length', 'length']);
    // OpenAI's last chunk of a stream asked to include usage: no choices, the usage.
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 3, completion_tokens: 20, total_tokens: 23 },
    });

    const chat = await client().chat.completions.create({
      model: 'gpt',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
      n: 2,
      stream: true,
    });
    const roles: string[] = [];
    let last;
    for await (const chunk of chat) {
      for (const c of chunk.choices) if (c.delta.role) roles[c.index] = c.delta.role;
      last = chunk;
    }
    expect(roles).toEqual(['assistant', 'assistant']);
    // Without include_usage, no usage chunk: the last one ends a choice.
    expect(last?.choices[0]?.finish_reason).toBe('length');
  });

  it('frees every choice’s slot when the client of a stream of n goes away', async () => {
    const controller = new AbortController();
    const response = await fetch(`${t.inference}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', prompt: 'a', max_tokens: 120, n: 3, stream: true }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    const pool = t.server.models.generationPool('gpt', undefined);
    expect(pool.generation().active).toBeGreaterThan(0);
    controller.abort();
    for (let i = 0; i < 200 && pool.generation().active > 0; i++) await sleep(10);
    expect(pool.generation()).toMatchObject({ active: 0, waiting: 0, cacheTokensReserved: 0 });
  });

  it('gives legacy completions logprobs equal to the model’s log-softmax, top k included', async () => {
    const answer = await client().completions.create({
      model: 'gpt',
      prompt: 'The ',
      max_tokens: 6,
      temperature: 0,
      logprobs: 3,
    });
    const { text, logprobs } = answer.choices[0]!;
    expect(logprobs!.tokens!.join('')).toBe(text);
    // One character a token: each starts one after the last.
    expect(logprobs!.text_offset).toEqual([0, 1, 2, 3, 4, 5]);
    const reference = await referenceLogSoftmax('The ', logprobs!.tokens!);
    reference.steps.forEach((step, i) => {
      const chosen = reference.tokens[i]!;
      expect(logprobs!.token_logprobs![i]).toBeCloseTo(step[chosen]!, 4);
      const top = Object.entries(logprobs!.top_logprobs![i]!);
      expect(top).toHaveLength(3);
      // Greedy: the chosen token is the most likely.
      expect(chosen).toBe(ranked(step, 1)[0]);
      expect(new Set(top.map(([token]) => reference.idOf(token)))).toEqual(
        new Set(ranked(step, 3)),
      );
      for (const [token, logprob] of top)
        expect(logprob).toBeCloseTo(step[reference.idOf(token)]!, 4);
    });

    const none = await client().completions.create({ model: 'gpt', prompt: 'The ', max_tokens: 2 });
    expect(none.choices[0]!.logprobs).toBeNull();
  });

  it('gives chat logprobs with bytes and top_logprobs, plain and streamed alike', async () => {
    const request = {
      model: 'gpt',
      messages: [{ role: 'user' as const, content: 'Hi' }],
      max_tokens: 8,
      temperature: 0.8,
      seed: 5,
      logprobs: true,
      top_logprobs: 5,
    };
    const answer = await client().chat.completions.create(request);
    const content = answer.choices[0]!.logprobs!.content!;
    expect(content.map((c) => c.token).join('')).toBe(answer.choices[0]!.message.content);
    for (const entry of content) {
      expect(entry.bytes).toEqual(Array.from(Buffer.from(entry.token)));
      const top = entry.top_logprobs.map((a) => a.logprob);
      expect(top).toHaveLength(5);
      expect(top).toEqual([...top].sort((a, b) => b - a));
      // Sampled, the chosen token may be any of them, never more likely than the first.
      expect(entry.logprob).toBeLessThanOrEqual(top[0]! + 1e-12);
      expect(top.reduce((sum, l) => sum + Math.exp(l), 0)).toBeLessThanOrEqual(1 + 1e-9);
      const listed = entry.top_logprobs.find((a) => a.token === entry.token);
      if (listed) expect(listed.logprob).toBe(entry.logprob);
    }
    const reference = await referenceLogSoftmax(
      'user: Hi\nassistant: ',
      content.map((c) => c.token),
    );
    reference.steps.forEach((step, i) =>
      expect(content[i]!.logprob).toBeCloseTo(step[reference.tokens[i]!]!, 4),
    );

    const stream = await client().chat.completions.create({ ...request, stream: true });
    const streamed = [];
    for await (const chunk of stream)
      for (const choice of chunk.choices) streamed.push(...(choice.logprobs?.content ?? []));
    expect(streamed).toEqual(content);
  });

  it('stops at stop strings and at max_tokens or max_completion_tokens', async () => {
    const reference = await client().completions.create({
      model: 'gpt',
      prompt: 'Hello',
      max_tokens: 20,
      temperature: 0,
    });
    const text = reference.choices[0]!.text;
    const stop = text.slice(6, 8);
    const stopped = await client().completions.create({
      model: 'gpt',
      prompt: 'Hello',
      max_tokens: 20,
      temperature: 0,
      stop: [stop, '\u0000'],
    });
    expect(stopped.choices[0]).toMatchObject({
      text: text.slice(0, text.indexOf(stop)),
      finish_reason: 'stop',
    });
    const chat = await client().chat.completions.create({
      model: 'gpt',
      messages: [{ role: 'user', content: 'Hi' }],
      max_completion_tokens: 3,
    });
    expect(chat.choices[0]!.finish_reason).toBe('length');
    expect(chat.usage?.completion_tokens).toBe(3);
  });

  it('refuses what it does not implement, naming the field in OpenAI’s error', async () => {
    const base = { model: 'gpt', messages: [{ role: 'user' as const, content: 'Hi' }] };
    for (const [extra, param, code] of [
      [{ frobnicate: true }, 'frobnicate', 'unknown_parameter'],
      [{ response_format: { type: 'yaml' } }, 'response_format.type', 'invalid_value'],
      // This model has no end token: a response format could never end its text.
      [{ response_format: { type: 'json_object' } }, 'response_format', 'invalid_input'],
      [{ presence_penalty: 1 }, 'presence_penalty', 'unsupported_parameter'],
      [{ logprobs: true, top_logprobs: 21 }, 'top_logprobs', 'invalid_value'],
      [{ top_logprobs: 2 }, 'top_logprobs', 'invalid_value'],
      [{ n: 0 }, 'n', 'invalid_value'],
    ] as const) {
      const error = await clientError(
        client().chat.completions.create({ ...base, ...extra } as never),
      );
      expect(error, param).toBeInstanceOf(BadRequestError);
      expect(error, param).toMatchObject({ status: 400, param, code });
    }
    const legacy = await clientError(
      client().completions.create({ model: 'gpt', prompt: 'Hi', logprobs: 6 }),
    );
    expect(legacy).toMatchObject({ status: 400, param: 'logprobs', code: 'invalid_value' });
  });
});
