import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { openAiErrorBody } from '../http/openai-error.js';
import {
  checkOpenAiRequest,
  inOpenAiTerms,
  openAiChoices,
  openAiParameters,
} from './openai-request.js';

const completion = { model: 'gpt', prompt: 'Hello' };
const chat = { model: 'gpt', messages: [{ role: 'user', content: 'Hi' }] };

/** The OpenAI error a refused request would be answered with (always a 400). */
function refusal(body: Record<string, unknown>, endpoint: 'completions' | 'chat') {
  try {
    checkOpenAiRequest(body, endpoint);
  } catch (error) {
    expect(KilnError.is(error, KilnErrorCode.InvalidInput)).toBe(true);
    return openAiErrorBody(400, (error as Error).message, error).error;
  }
  throw new Error(`accepted ${JSON.stringify(body)}`);
}

describe('checkOpenAiRequest', () => {
  it('accepts what Kiln serves, null meaning left out', () => {
    checkOpenAiRequest(
      {
        ...completion,
        max_tokens: 5,
        temperature: 0.7,
        top_p: 0.9,
        top_k: 40,
        repetition_penalty: 1.1,
        seed: 3,
        stop: ['\n', 'x'],
        n: 1,
        user: 'u',
        stream: true,
        stream_options: { include_usage: true },
      },
      'completions',
    );
    checkOpenAiRequest(
      { ...chat, max_completion_tokens: null, stop: 'x', temperature: null },
      'chat',
    );
  });

  it.each([
    ['completions', 'best_of', 2, 1],
    ['completions', 'echo', true, false],
    ['completions', 'suffix', 'end', ''],
    ['chat', 'presence_penalty', -1, 0],
    ['chat', 'frequency_penalty', 1, 0],
    ['chat', 'logit_bias', { '1': 5 }, {}],
    ['chat', 'tool_choice', 'required', 'none'],
    ['chat', 'parallel_tool_calls', false, null],
    ['chat', 'functions', [], null],
    ['chat', 'function_call', 'auto', 'none'],
    ['chat', 'modalities', ['text', 'audio'], ['text']],
    ['chat', 'service_tier', 'flex', 'auto'],
    ['chat', 'store', true, false],
    ['chat', 'metadata', { a: 'b' }, null],
    ['chat', 'audio', { voice: 'x' }, null],
    ['chat', 'reasoning_effort', 'low', null],
  ] as const)(
    '%s: refuses %s = %j, accepts what asks for nothing',
    (endpoint, field, used, noop) => {
      const base = endpoint === 'chat' ? chat : completion;
      expect(refusal({ ...base, [field]: used }, endpoint)).toMatchObject({
        param: field,
        code: 'unsupported_parameter',
        type: 'invalid_request_error',
      });
      checkOpenAiRequest({ ...base, [field]: noop }, endpoint);
    },
  );

  it.each([
    ['max_tokens', '5', 'invalid_type'],
    ['max_tokens', 0, 'invalid_value'],
    ['max_completion_tokens', 1.5, 'invalid_value'],
    ['temperature', -0.1, 'invalid_value'],
    ['top_p', 0, 'invalid_value'],
    ['top_k', -2, 'invalid_value'],
    ['repetition_penalty', 0, 'invalid_value'],
    ['seed', -1, 'invalid_value'],
    ['stop', [''], 'invalid_value'],
    ['stop', { a: 1 }, 'invalid_type'],
    ['stream', 'true', 'invalid_type'],
    ['n', 0, 'invalid_value'],
    ['n', 129, 'invalid_value'],
    ['logprobs', true, 'invalid_type'],
    ['logprobs', 6, 'invalid_value'],
    ['model', ['gpt'], 'invalid_type'],
    ['prompt', 5, 'invalid_type'],
    ['prompt', ['a', 'b'], 'unsupported_parameter'],
    ['prompt', [[1, 2]], 'unsupported_parameter'],
  ] as const)('names %s = %j (%s)', (field, value, code) => {
    expect(refusal({ ...completion, [field]: value }, 'completions')).toMatchObject({
      param: field,
      code,
    });
  });

  it('takes response_format text, json_object and json_schema; names what is wrong in it', () => {
    const schema = { type: 'object', properties: { a: { type: 'integer' } } };
    for (const format of [
      { type: 'text' },
      { type: 'json_object' },
      { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
      { type: 'json_schema', json_schema: { name: 'any', description: 'no schema' } },
    ])
      checkOpenAiRequest({ ...chat, response_format: format }, 'chat');
    expect(
      openAiChoices(
        { ...chat, response_format: { type: 'json_schema', json_schema: { name: 'a', schema } } },
        'chat',
      ),
    ).toEqual({ n: 1, responseFormat: { type: 'json_schema', schema: JSON.stringify(schema) } });
    expect(openAiChoices({ ...chat, response_format: { type: 'text' } }, 'chat')).toEqual({ n: 1 });
    const cases: [unknown, string, string][] = [
      ['json', 'response_format', 'invalid_type'],
      [{}, 'response_format.type', 'missing_required_parameter'],
      [{ type: 'yaml' }, 'response_format.type', 'invalid_value'],
      [{ type: 'json_object', schema }, 'response_format.schema', 'unknown_parameter'],
      [{ type: 'json_schema' }, 'response_format.json_schema', 'missing_required_parameter'],
      [
        { type: 'json_schema', json_schema: { schema } },
        'response_format.json_schema.name',
        'missing_required_parameter',
      ],
      [
        { type: 'json_schema', json_schema: { name: 'a b', schema } },
        'response_format.json_schema.name',
        'invalid_value',
      ],
      [
        { type: 'json_schema', json_schema: { name: 'a', schema: 'x' } },
        'response_format.json_schema.schema',
        'invalid_type',
      ],
      [
        { type: 'json_schema', json_schema: { name: 'a', strict: 'yes' } },
        'response_format.json_schema.strict',
        'invalid_type',
      ],
    ];
    for (const [format, param, code] of cases)
      expect(refusal({ ...chat, response_format: format }, 'chat'), param).toMatchObject({
        param,
        code,
      });
    expect(
      refusal({ ...completion, response_format: { type: 'json_object' } }, 'completions'),
    ).toMatchObject({ param: 'response_format', code: 'unknown_parameter' });
  });

  it('names the message and the part of it that is wrong', () => {
    const cases: [unknown, string, string][] = [
      ['Hi', 'messages', 'invalid_type'],
      [[], 'messages', 'invalid_value'],
      [['Hi'], 'messages[0]', 'invalid_type'],
      [[{ content: 'Hi' }], 'messages[0].role', 'missing_required_parameter'],
      [
        [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
        'messages[0].content',
        'unsupported_parameter',
      ],
      [
        [{ role: 'assistant', content: 'x', tool_calls: 'x' }],
        'messages[0].tool_calls',
        'invalid_type',
      ],
    ];
    for (const [messages, param, code] of cases)
      expect(refusal({ model: 'gpt', messages }, 'chat'), param).toMatchObject({ param, code });
  });

  it('takes tools for the chat template and assistant turns of tool calls', () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }];
    const calls = [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }];
    checkOpenAiRequest(
      {
        ...chat,
        tools,
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: null, tool_calls: calls },
          { role: 'tool', content: '1', tool_call_id: 'c' },
        ],
      },
      'chat',
    );
    expect(refusal({ ...chat, tools: 'f' }, 'chat')).toMatchObject({
      param: 'tools',
      code: 'invalid_type',
    });
    expect(refusal({ ...completion, tools }, 'completions')).toMatchObject({
      param: 'tools',
      code: 'unknown_parameter',
    });
  });

  it('refuses fields OpenAI does not define for the route, and stream_options without stream', () => {
    expect(refusal({ ...completion, ignore_eos: true }, 'completions')).toMatchObject({
      param: 'ignore_eos',
      code: 'unknown_parameter',
    });
    expect(refusal({ ...chat, prompt: 'x' }, 'chat')).toMatchObject({ param: 'prompt' });
    expect(refusal({ ...chat, toString: 'x' }, 'chat')).toMatchObject({ param: 'toString' });
    expect(refusal({ ...chat, stream_options: { include_usage: true } }, 'chat')).toMatchObject({
      param: 'stream_options',
    });
    expect(refusal({ model: 'gpt' }, 'completions')).toMatchObject({
      param: 'prompt',
      code: 'missing_required_parameter',
    });
  });
});

describe('openAiChoices', () => {
  it('reads n and each route’s way of asking for log-probabilities', () => {
    const top = { ...chat, n: 3, logprobs: true, top_logprobs: 20 };
    checkOpenAiRequest(top, 'chat');
    expect(openAiChoices(top, 'chat')).toEqual({ n: 3, logprobs: true, topLogprobs: 20 });
    expect(openAiChoices({ ...chat, logprobs: false }, 'chat')).toEqual({ n: 1 });
    const legacy = { ...completion, logprobs: 0 };
    checkOpenAiRequest(legacy, 'completions');
    expect(openAiChoices(legacy, 'completions')).toEqual({ n: 1, logprobs: true, topLogprobs: 0 });
    expect(openAiChoices(completion, 'completions')).toEqual({ n: 1 });
  });

  it('refuses what OpenAI refuses: chat logprobs not a boolean, top_logprobs without them', () => {
    expect(refusal({ ...chat, logprobs: 2 }, 'chat')).toMatchObject({
      param: 'logprobs',
      code: 'invalid_type',
    });
    expect(refusal({ ...chat, top_logprobs: 21, logprobs: true }, 'chat')).toMatchObject({
      param: 'top_logprobs',
      code: 'invalid_value',
    });
    expect(refusal({ ...chat, top_logprobs: 2 }, 'chat')).toMatchObject({
      param: 'top_logprobs',
      code: 'invalid_value',
    });
    expect(refusal({ ...completion, top_logprobs: 2 }, 'completions')).toMatchObject({
      param: 'top_logprobs',
      code: 'unknown_parameter',
    });
  });
});

describe('openAiParameters', () => {
  it('reads OpenAI fields in Kiln terms: 16 tokens, temperature 0 is greedy, top_k -1 keeps all', () => {
    expect(openAiParameters({})).toMatchObject({ maxNewTokens: 16, doSample: true });
    expect(
      openAiParameters({ max_completion_tokens: 7, temperature: 0, top_k: -1, stop: 'x' }),
    ).toEqual({ maxNewTokens: 7, doSample: false, topK: 0, stop: ['x'] });
  });

  it("takes what the request leaves out from the model's generation_config.json", () => {
    const defaults = { maxNewTokens: 40, temperature: 0.6, topP: 0.9, topK: 20 };
    expect(openAiParameters({}, defaults)).toEqual({
      maxNewTokens: 40,
      doSample: true,
      temperature: 0.6,
      topP: 0.9,
      topK: 20,
      stop: [],
    });
    expect(openAiParameters({ max_tokens: 3, temperature: 1, top_k: -1 }, defaults)).toEqual({
      maxNewTokens: 3,
      doSample: true,
      temperature: 1,
      topP: 0.9,
      topK: 0,
      stop: [],
    });
    expect(openAiParameters({}, { doSample: false })).toMatchObject({ doSample: false });
  });
});

describe('inOpenAiTerms', () => {
  it("tells the scheduler's max_new_tokens as the field the request used", () => {
    const limit = new KilnError(
      KilnErrorCode.InvalidInput,
      "prompt (5 tokens) + max_new_tokens (100) exceeds the model's limit of 64 tokens",
    );
    const told = inOpenAiTerms(limit, { max_completion_tokens: 100 }) as KilnError;
    expect(openAiErrorBody(400, told.message, told).error).toEqual({
      message:
        "prompt (5 tokens) + max_completion_tokens (100) exceeds the model's limit of 64 tokens",
      type: 'invalid_request_error',
      param: 'max_completion_tokens',
      code: 'context_length_exceeded',
    });
    const other = new KilnError(KilnErrorCode.QueueFull, 'full');
    expect(inOpenAiTerms(other, {})).toBe(other);
  });
});
