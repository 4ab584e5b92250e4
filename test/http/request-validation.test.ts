import fs from 'node:fs';
import path from 'node:path';
import OpenAI, { APIError, BadRequestError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel, tinyModel } from '@kiln/model-tools';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('request-validation');
  const gpt = await gptDecoderModel(path.join(root, 'gpt'), {
    layers: 1,
    hidden: 16,
    heads: 2,
    maxLen: 64,
    vocab: defaultCharVocab().slice(1),
  });
  const tiny = await tinyModel(path.join(root, 'tiny'));
  t = await startTestServer({ models: [`gpt=${gpt.dir}`, `tiny=${tiny}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const post = (route: string, body: unknown) =>
  fetch(`${t.inference}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

interface OpenAiError {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** The OpenAI error of a request that must fail: the body OpenAI's official clients read. */
async function openAiError(route: string, body: unknown, status = 400): Promise<OpenAiError> {
  const answer = await jsonOf(await post(route, body));
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expectCleanError(answer.body);
  expect(answer.body).toEqual({
    error: {
      message: expect.any(String),
      type: expect.any(String),
      param: expect.toSatisfy((p) => p === null || typeof p === 'string'),
      code: expect.toSatisfy((c) => c === null || typeof c === 'string'),
    },
  });
  return answer.body as OpenAiError;
}

const completion = { model: 'gpt', prompt: 'Hello', max_tokens: 4 };
const chat = { model: 'gpt', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 };

describe('OpenAI routes refuse what they would not honour, in OpenAI error bodies', () => {
  it('answers an unknown model with not_found_error / model_not_found', async () => {
    for (const route of ['/v1/completions', '/v1/chat/completions']) {
      const { error } = await openAiError(
        route,
        { ...(route.includes('chat') ? chat : completion), model: 'nope' },
        404,
      );
      expect(error).toMatchObject({
        type: 'not_found_error',
        param: 'model',
        code: 'model_not_found',
      });
      expect(error.message).toMatch(/nope/);
    }
  });

  it('names a field of the wrong type', async () => {
    const stream = await openAiError('/v1/completions', { ...completion, stream: 'true' });
    expect(stream.error).toMatchObject({
      type: 'invalid_request_error',
      param: 'stream',
      code: 'invalid_type',
    });
    expect(stream.error.message).toMatch(/'stream'.*boolean.*string/);
    for (const [field, value] of [
      ['model', 5],
      ['temperature', '0'],
      ['top_p', true],
      ['seed', 1.5],
      ['stop', 7],
      ['user', {}],
      ['stream_options', 'yes'],
    ] as const) {
      const { error } = await openAiError('/v1/chat/completions', {
        ...chat,
        stream: true,
        [field]: value,
      });
      expect(error.param, field).toBe(field);
    }
    const content = await openAiError('/v1/chat/completions', {
      ...chat,
      messages: [{ role: 'user', content: 1 }],
    });
    expect(content.error.param).toBe('messages[0].content');
  });

  it('names max_tokens, not max_new_tokens, whatever the fault', async () => {
    for (const value of [-1, 0, 2.5]) {
      const { error } = await openAiError('/v1/completions', { ...completion, max_tokens: value });
      expect(error).toMatchObject({ param: 'max_tokens', code: 'invalid_value' });
      expect(error.message).not.toMatch(/max_new_tokens/);
    }
    const chatBudget = await openAiError('/v1/chat/completions', {
      ...chat,
      max_tokens: undefined,
      max_completion_tokens: -1,
    });
    expect(chatBudget.error.param).toBe('max_completion_tokens');
    // Beyond the model's 64 positions: found by the scheduler, still told in OpenAI's words.
    for (const stream of [false, true]) {
      const { error } = await openAiError('/v1/completions', {
        ...completion,
        max_tokens: 100,
        stream,
      });
      expect(error).toMatchObject({ param: 'max_tokens', code: 'context_length_exceeded' });
      expect(error.message).toMatch(/max_tokens \(100\) exceeds the model's limit of 64 tokens/);
    }
  });

  it('refuses fields Kiln does not implement as unsupported_parameter', async () => {
    for (const [route, base, field, value] of [
      ['/v1/completions', completion, 'best_of', 2],
      ['/v1/completions', completion, 'echo', true],
      ['/v1/completions', completion, 'suffix', '!'],
      [
        '/v1/chat/completions',
        chat,
        'tools',
        [{ type: 'function', function: { name: 'f', parameters: {} } }],
      ],
      ['/v1/chat/completions', chat, 'tool_choice', 'auto'],
      ['/v1/chat/completions', chat, 'presence_penalty', 0.5],
      ['/v1/chat/completions', chat, 'logit_bias', { '5': 10 }],
    ] as const) {
      const { error } = await openAiError(route, { ...base, [field]: value });
      expect(error, `${route} ${field}`).toMatchObject({
        type: 'invalid_request_error',
        param: field,
        code: 'unsupported_parameter',
      });
      expect(error.message).toMatch(/is not supported/);
    }
  });

  it('refuses fields OpenAI does not define, or defines for the other route', async () => {
    for (const [route, body, field] of [
      ['/v1/completions', { ...completion, max_length: 5 }, 'max_length'],
      ['/v1/completions', { ...completion, messages: chat.messages }, 'messages'],
      ['/v1/chat/completions', { ...chat, echo: false }, 'echo'],
      [
        '/v1/chat/completions',
        { ...chat, stream: true, stream_options: { usage: true } },
        'stream_options.usage',
      ],
    ] as const) {
      const { error } = await openAiError(route, body);
      expect(error, field).toMatchObject({ param: field, code: 'unknown_parameter' });
      expect(error.message).toBe(`Unrecognized request argument supplied: ${field}`);
    }
    const missing = await openAiError('/v1/chat/completions', { model: 'gpt' });
    expect(missing.error).toMatchObject({ param: 'messages', code: 'missing_required_parameter' });
  });

  it('serves fields that ask for nothing Kiln lacks: the defaults clients send', async () => {
    const answer = await post('/v1/chat/completions', {
      ...chat,
      temperature: 0,
      n: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      logprobs: false,
      logit_bias: {},
      tool_choice: 'none',
      response_format: { type: 'text' },
      user: 'someone',
      stop: null,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(answer.status).toBe(200);
    expect(await answer.text()).toMatch(/data: \[DONE\]\n\n$/);
    const plain = await jsonOf(
      await post('/v1/completions', { ...completion, echo: false, best_of: 1, top_k: -1 }),
    );
    expect(plain.status).toBe(200);
  });

  it('answers bodies, routes and methods it cannot serve in OpenAI bodies too', async () => {
    const notJson = await openAiError('/v1/completions', '{');
    expect(notJson.error.type).toBe('invalid_request_error');
    const noRoute = await openAiError('/v1/embeddings', { input: 'x' }, 404);
    expect(noRoute.error).toMatchObject({ type: 'not_found_error', code: null });
    expect(noRoute.error.message).toBe('no route for POST /v1/embeddings');
    const notGenerative = await openAiError('/v1/completions', { ...completion, model: 'tiny' });
    expect(notGenerative.error.message).toMatch(/does not generate text/);
  });
});

describe('v2 parameters must be JSON objects', () => {
  const input = { name: 'x', shape: [1, 4], datatype: 'FP32', data: [1, 2, 3, 4] };

  /** The v2 error of a request that must fail: `{"error": "..."}`, as Triton answers. */
  async function v2Error(route: string, body: unknown, status = 400): Promise<string> {
    const answer = await jsonOf(await post(route, body));
    expect(answer.status, JSON.stringify(answer.body)).toBe(status);
    expect(answer.body).toEqual({ error: expect.any(String) });
    expectCleanError(answer.body);
    return (answer.body as { error: string }).error;
  }

  it('refuses a string or a list as parameters of an infer request, its outputs and inputs', async () => {
    expect((await post('/v2/models/tiny/infer', { inputs: [input] })).status).toBe(200);
    for (const parameters of ['binary_data_output', [true]]) {
      expect(await v2Error('/v2/models/tiny/infer', { inputs: [input], parameters })).toMatch(
        /"parameters" must be a JSON object/,
      );
      expect(
        await v2Error('/v2/models/tiny/infer', {
          inputs: [input],
          outputs: [{ name: 'y', parameters }],
        }),
      ).toMatch(/output 0 "parameters" must be a JSON object/);
      expect(
        await v2Error('/v2/models/tiny/infer', { inputs: [{ ...input, parameters }] }),
      ).toMatch(/non-object "parameters"/);
    }
    expect(
      await v2Error('/v2/models/tiny/infer', {
        inputs: [input],
        parameters: { binary_data_output: 'true' },
      }),
    ).toMatch(/binary_data_output must be true or false/);
  });

  it('refuses a string or a list as parameters of a generate request, in the v2 shape', async () => {
    for (const route of ['/v2/models/gpt/generate', '/v2/models/gpt/generate_stream'])
      for (const parameters of ['{"max_new_tokens": 4}', [4]])
        expect(await v2Error(route, { text_input: 'Hello', parameters })).toMatch(
          /"parameters" must be a JSON object/,
        );
    expect(
      await v2Error('/v2/models/gpt/generate', { text_input: 'Hello', max_tokens: '4' }),
    ).toMatch(/max_tokens must be an integer/);
    expect(await v2Error('/v2/models/nope/generate', { text_input: 'Hello' }, 404)).toMatch(/nope/);
    const served = await jsonOf(
      await post('/v2/models/gpt/generate', {
        text_input: 'Hello',
        parameters: { max_new_tokens: 3 },
      }),
    );
    expect(served.status).toBe(200);
  });

  it('refuses generation parameters Kiln would ignore, on /predictions and v2 generate', async () => {
    const lmiError = async (body: unknown) => {
      const answer = await jsonOf(await post('/predictions/gpt', body));
      expect(answer.status, JSON.stringify(answer.body)).toBe(400);
      return expectCleanError(answer.body);
    };
    expect(await lmiError({ inputs: 'Hi', parameters: { typical_p: 0.5 } })).toMatch(
      /parameter typical_p is not supported/,
    );
    expect(await lmiError({ inputs: 'Hi', parameters: { max_new_token: 3 } })).toMatch(
      /did you mean max_new_tokens/,
    );
    expect(await lmiError({ inputs: 'Hi', prompt: 'Hi' })).toMatch(/unknown field prompt/);
    expect(await lmiError({ inputs: 'Hi', stream: 'true' })).toMatch(
      /stream must be true or false/,
    );
    expect(await v2Error('/v2/models/gpt/generate', { text_input: 'Hi', beam_width: 4 })).toMatch(
      /unknown parameter beam_width/,
    );
    expect(
      await v2Error('/v2/models/gpt/generate', {
        text_input: 'Hi',
        parameters: { return_full_text: true },
      }),
    ).toMatch(/return_full_text is not supported/);
    // The values clients send by default still serve.
    const served = await jsonOf(
      await post('/predictions/gpt', {
        inputs: 'Hi',
        parameters: { max_new_tokens: 3, details: true, return_full_text: false },
      }),
    );
    expect(served.status).toBe(200);
  });
});

describe('the official openai client', () => {
  const client = () =>
    new OpenAI({ baseURL: `${t.inference}/v1`, apiKey: 'unused', maxRetries: 0 });

  /** The error the client throws for a request that must fail. */
  async function clientError(call: Promise<unknown>): Promise<APIError> {
    const error = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(APIError);
    return error as APIError;
  }

  it('shows the status, message, param and code of Kiln’s errors', async () => {
    const unknown = await clientError(
      client().completions.create({ model: 'nope', prompt: 'Hi', max_tokens: 2 }),
    );
    expect(unknown).toBeInstanceOf(NotFoundError);
    expect(unknown).toMatchObject({ status: 404, param: 'model', code: 'model_not_found' });
    expect(unknown.message).toMatch(/^404 .*nope/);
    expect(unknown.message).not.toMatch(/no body/);

    const tokens = await clientError(
      client().completions.create({ model: 'gpt', prompt: 'Hi', max_tokens: -1 }),
    );
    expect(tokens).toBeInstanceOf(BadRequestError);
    expect(tokens).toMatchObject({ status: 400, param: 'max_tokens' });
    expect(tokens.message).not.toMatch(/max_new_tokens/);

    const echo = await clientError(
      client().completions.create({ model: 'gpt', prompt: 'Hi', max_tokens: 2, echo: true }),
    );
    expect(echo).toMatchObject({ status: 400, param: 'echo', code: 'unsupported_parameter' });

    const tools = await clientError(
      client().chat.completions.create({
        model: 'gpt',
        messages: [{ role: 'user', content: 'Hi' }],
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      }),
    );
    expect(tools).toMatchObject({ status: 400, param: 'tools', code: 'unsupported_parameter' });
  });

  it('gets a completion, plain and streamed, with the same greedy text', async () => {
    const plain = await client().completions.create({
      model: 'gpt',
      prompt: 'Hello',
      max_tokens: 6,
      temperature: 0,
    });
    const streamed = await client().completions.create({
      model: 'gpt',
      prompt: 'Hello',
      max_tokens: 6,
      temperature: 0,
      stream: true,
    });
    let text = '';
    for await (const chunk of streamed) text += chunk.choices[0]?.text ?? '';
    expect(plain.choices[0]!.text).toHaveLength(6);
    expect(text).toBe(plain.choices[0]!.text);
  });
});
