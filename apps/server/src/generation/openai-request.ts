import {
  type GenerationDefaults,
  type GenerationParameters,
  KilnError,
  KilnErrorCode,
  MAX_TOP_LOGPROBS,
  type ResponseFormat,
  parseGenerationParameters,
} from '@kiln/core';
import { openAiFieldError } from '../http/openai-error.js';
import type { ChoiceOptions } from './generation-request.js';

/** The two OpenAI routes Kiln serves. */
export type OpenAiEndpoint = 'completions' | 'chat';

/** How Kiln treats one field of an OpenAI request body. */
interface FieldRule {
  /** The endpoints whose request defines the field: OpenAI's, plus vLLM's extras Kiln serves. */
  readonly on: readonly OpenAiEndpoint[];
  /** Checks a value Kiln acts on (not null); throws a 400 naming the field. */
  readonly check?: (value: unknown, name: string, endpoint: OpenAiEndpoint) => void;
  /**
   * For a field Kiln does not implement: whether the value asks for nothing (it equals what
   * leaving the field out means), so that a client sending its defaults is still served.
   */
  readonly unsupportedUnless?: (value: unknown) => boolean;
}

const BOTH: readonly OpenAiEndpoint[] = ['completions', 'chat'];
const COMPLETIONS: readonly OpenAiEndpoint[] = ['completions'];
const CHAT: readonly OpenAiEndpoint[] = ['chat'];

/** OpenAI's bounds: choices per request, and the legacy completions' `logprobs`. */
const MAX_CHOICES = 128;
const MAX_COMPLETION_LOGPROBS = 5;

/** What a value is, in the words of OpenAI's type errors. */
function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'an integer' : 'a decimal';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

const invalidType = (name: string, expected: string, value: unknown) =>
  openAiFieldError(
    name,
    'invalid_type',
    `Invalid type for '${name}': expected ${expected}, but got ${kind(value)} instead.`,
  );

const invalidValue = (name: string, expected: string, value: unknown) =>
  openAiFieldError(
    name,
    'invalid_value',
    `Invalid '${name}': expected ${expected}${typeof value === 'number' ? `, but got ${value} instead` : ''}.`,
  );

const unsupported = (
  name: string,
  message = `Unsupported parameter: '${name}' is not supported by this server.`,
) => openAiFieldError(name, 'unsupported_parameter', message);

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const string = (value: unknown, name: string) => {
  if (typeof value !== 'string') throw invalidType(name, 'a string', value);
};
const boolean = (value: unknown, name: string) => {
  if (typeof value !== 'boolean') throw invalidType(name, 'a boolean', value);
};
const number =
  (expected: string, valid: (n: number) => boolean) => (value: unknown, name: string) => {
    if (typeof value !== 'number') throw invalidType(name, 'a number', value);
    if (!valid(value)) throw invalidValue(name, expected, value);
  };
const integer =
  (expected: string, valid: (n: number) => boolean) => (value: unknown, name: string) => {
    if (typeof value !== 'number') throw invalidType(name, 'an integer', value);
    if (!Number.isInteger(value) || !valid(value)) throw invalidValue(name, expected, value);
  };

const maxTokens = integer('an integer >= 1', (n) => n >= 1);

function stop(value: unknown, name: string): void {
  if (typeof value !== 'string' && !Array.isArray(value))
    throw invalidType(name, 'a string or an array of strings', value);
  const stops: unknown[] = Array.isArray(value) ? value : [value];
  if (!stops.every((s) => typeof s === 'string' && s !== ''))
    throw invalidValue(name, 'non-empty strings', value);
}

function streamOptions(value: unknown, name: string): void {
  if (!isObject(value)) throw invalidType(name, 'an object', value);
  for (const [key, option] of Object.entries(value)) {
    // include_usage adds a last chunk of usage; Kiln does not pad chunks (obfuscation).
    if (key === 'include_usage' || key === 'include_obfuscation') boolean(option, `${name}.${key}`);
    else throw unknown(`${name}.${key}`);
  }
}

function prompt(value: unknown, name: string): void {
  if (typeof value === 'string') return;
  if (!Array.isArray(value)) throw invalidType(name, 'a string', value);
  if (value.length !== 1 || typeof value[0] !== 'string')
    throw unsupported(
      name,
      `'${name}' is supported as one string only: send one request per prompt.`,
    );
}

/**
 * Messages of text: a chat template reads each one's role and text content, and the tool
 * calls of an assistant's turn and the id a tool's answer names, when a chat uses tools.
 */
function messages(value: unknown, name: string): void {
  if (!Array.isArray(value)) throw invalidType(name, 'an array', value);
  if (value.length === 0) throw invalidValue(name, 'a non-empty array', value);
  value.forEach((message: unknown, i) => {
    const at = `${name}[${i}]`;
    if (!isObject(message)) throw invalidType(at, 'an object', message);
    for (const [key, field] of Object.entries(message)) {
      if (key === 'role' || key === 'name') string(field, `${at}.${key}`);
      else if (key === 'content') {
        if (Array.isArray(field))
          throw unsupported(
            `${at}.content`,
            `'${at}.content' is supported as a string only, not as an array of parts.`,
          );
        // An assistant's turn of tool calls may have no content.
        if (!(field === null && Array.isArray(message.tool_calls))) string(field, `${at}.content`);
      } else if (key === 'tool_calls') {
        if (!Array.isArray(field) || !field.every(isObject))
          throw invalidType(`${at}.${key}`, 'an array of objects', field);
      } else if (key === 'tool_call_id') string(field, `${at}.${key}`);
      else throw unsupported(`${at}.${key}`);
    }
    if (message.role === undefined) throw missing(`${at}.role`);
    if (message.content === undefined && message.tool_calls === undefined)
      throw missing(`${at}.content`);
  });
}

/**
 * OpenAI's `response_format`: `text` (no constraint), `json_object`, or `json_schema` with a
 * `name` and a `schema` (any JSON when it has none). Whether the schema compiles is the
 * generation pool's to say.
 */
function responseFormatOf(value: unknown, name: string): ResponseFormat | undefined {
  if (!isObject(value)) throw invalidType(name, 'an object', value);
  const type = value.type;
  if (absent(type)) throw missing(`${name}.type`);
  for (const key of Object.keys(value))
    if (key !== 'type' && !(type === 'json_schema' && key === 'json_schema'))
      throw unknown(`${name}.${key}`);
  if (type === 'text') return undefined;
  if (type === 'json_object') return { type: 'json_object' };
  if (type !== 'json_schema')
    throw openAiFieldError(
      `${name}.type`,
      'invalid_value',
      `Invalid value: '${String(type)}'. Supported values are: 'text', 'json_object' and 'json_schema'.`,
    );
  const at = `${name}.json_schema`;
  const spec = value.json_schema;
  if (absent(spec)) throw missing(at);
  if (!isObject(spec)) throw invalidType(at, 'an object', spec);
  for (const [key, field] of Object.entries(spec)) {
    if (key === 'name' || key === 'description') string(field, `${at}.${key}`);
    else if (key === 'strict') {
      if (!absent(field)) boolean(field, `${at}.${key}`);
    } else if (key === 'schema') {
      if (!isObject(field)) throw invalidType(`${at}.schema`, 'an object', field);
    } else throw unknown(`${at}.${key}`);
  }
  if (absent(spec.name)) throw missing(`${at}.name`);
  if (typeof spec.name === 'string' && !/^[A-Za-z0-9_-]{1,64}$/.test(spec.name))
    throw invalidValue(`${at}.name`, 'a name of a-z, A-Z, 0-9, _ and - (at most 64)', spec.name);
  // Kiln always keeps to the schema exactly, as OpenAI's strict mode.
  return { type: 'json_schema', schema: JSON.stringify(spec.schema ?? {}) };
}

const unknown = (name: string) =>
  openAiFieldError(name, 'unknown_parameter', `Unrecognized request argument supplied: ${name}`);

const missing = (name: string) =>
  openAiFieldError(name, 'missing_required_parameter', `Missing required parameter: '${name}'.`);

const absent = (value: unknown) => value === null || value === undefined;

/**
 * Every field OpenAI's completions and chat completions define. Those Kiln acts on are
 * checked; the others are refused unless their value asks for nothing, so that no answer
 * silently ignores what a client asked for.
 */
const FIELDS: Readonly<Record<string, FieldRule>> = {
  model: { on: BOTH, check: string },
  prompt: { on: COMPLETIONS, check: prompt },
  messages: { on: CHAT, check: messages },
  max_tokens: { on: BOTH, check: maxTokens },
  max_completion_tokens: { on: BOTH, check: maxTokens },
  // 0 asks for greedy decoding.
  temperature: { on: BOTH, check: number('a number >= 0', (n) => n >= 0) },
  top_p: { on: BOTH, check: number('a number in (0, 1]', (n) => n > 0 && n <= 1) },
  // Each choice is a job of its own; OpenAI's bound.
  n: {
    on: BOTH,
    check: integer(`an integer in [1, ${MAX_CHOICES}]`, (n) => n >= 1 && n <= MAX_CHOICES),
  },
  stream: { on: BOTH, check: boolean },
  stream_options: { on: BOTH, check: streamOptions },
  stop: { on: BOTH, check: stop },
  seed: { on: BOTH, check: integer('an integer >= 0', (n) => n >= 0) },
  // Identify the end user or a cache: nothing in the answer depends on them.
  user: { on: BOTH, check: string },
  safety_identifier: { on: CHAT, check: string },
  prompt_cache_key: { on: CHAT, check: string },
  // vLLM's sampling extras; top_k -1 keeps every token, as in vLLM.
  top_k: { on: BOTH, check: integer('an integer >= 0, or -1', (n) => n >= -1) },
  repetition_penalty: { on: BOTH, check: number('a number > 0', (n) => n > 0) },

  best_of: { on: COMPLETIONS, unsupportedUnless: (v) => absent(v) || v === 1 },
  echo: { on: COMPLETIONS, unsupportedUnless: (v) => absent(v) || v === false },
  suffix: { on: COMPLETIONS, unsupportedUnless: (v) => absent(v) || v === '' },
  // Chat asks with true (and top_logprobs); completions with how many of the most likely.
  logprobs: {
    on: BOTH,
    check: (value, name, endpoint) =>
      endpoint === 'chat'
        ? boolean(value, name)
        : integer(
            `an integer in [0, ${MAX_COMPLETION_LOGPROBS}]`,
            (n) => n >= 0 && n <= MAX_COMPLETION_LOGPROBS,
          )(value, name),
  },
  top_logprobs: {
    on: CHAT,
    check: integer(
      `an integer in [0, ${MAX_TOP_LOGPROBS}]`,
      (n) => n >= 0 && n <= MAX_TOP_LOGPROBS,
    ),
  },
  presence_penalty: { on: BOTH, unsupportedUnless: (v) => absent(v) || v === 0 },
  frequency_penalty: { on: BOTH, unsupportedUnless: (v) => absent(v) || v === 0 },
  logit_bias: {
    on: BOTH,
    unsupportedUnless: (v) => absent(v) || (isObject(v) && Object.keys(v).length === 0),
  },
  // Passed to the model's chat template, when it reads them (else refused where it is known).
  tools: {
    on: CHAT,
    check: (value, name) => {
      if (!Array.isArray(value) || !value.every(isObject))
        throw invalidType(name, 'an array of objects', value);
    },
  },
  // Whether the model calls a tool is its own choice: Kiln can neither force nor forbid one.
  tool_choice: { on: CHAT, unsupportedUnless: (v) => absent(v) || v === 'none' },
  parallel_tool_calls: { on: CHAT, unsupportedUnless: absent },
  functions: { on: CHAT, unsupportedUnless: absent },
  function_call: { on: CHAT, unsupportedUnless: (v) => absent(v) || v === 'none' },
  response_format: { on: CHAT, check: (value, name) => void responseFormatOf(value, name) },
  modalities: {
    on: CHAT,
    unsupportedUnless: (v) => absent(v) || (Array.isArray(v) && v.every((m) => m === 'text')),
  },
  service_tier: {
    on: CHAT,
    unsupportedUnless: (v) => absent(v) || v === 'auto' || v === 'default',
  },
  store: { on: CHAT, unsupportedUnless: (v) => absent(v) || v === false },
  metadata: { on: CHAT, unsupportedUnless: absent },
  audio: { on: CHAT, unsupportedUnless: absent },
  prediction: { on: CHAT, unsupportedUnless: absent },
  reasoning_effort: { on: CHAT, unsupportedUnless: absent },
  verbosity: { on: CHAT, unsupportedUnless: absent },
  web_search_options: { on: CHAT, unsupportedUnless: absent },
};

/**
 * Checks an OpenAI request body field by field, as OpenAI does: a wrong type or value, a field
 * Kiln does not implement, or one OpenAI does not define is a 400 naming it (`param`).
 */
export function checkOpenAiRequest(body: Record<string, unknown>, endpoint: OpenAiEndpoint): void {
  for (const [name, value] of Object.entries(body)) {
    const rule = Object.hasOwn(FIELDS, name) ? FIELDS[name] : undefined;
    if (!rule?.on.includes(endpoint)) throw unknown(name);
    if (rule.unsupportedUnless) {
      if (!rule.unsupportedUnless(value)) throw unsupported(name);
    } else if (!absent(value)) rule.check?.(value, name, endpoint);
  }
  const required = endpoint === 'chat' ? 'messages' : 'prompt';
  if (absent(body[required])) throw missing(required);
  if (!absent(body.top_logprobs) && body.top_logprobs !== 0 && body.logprobs !== true)
    throw openAiFieldError(
      'top_logprobs',
      'invalid_value',
      "Invalid value for 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is used.",
    );
  if (!absent(body.stream_options) && body.stream !== true)
    throw openAiFieldError(
      'stream_options',
      'invalid_value',
      "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
    );
}

/**
 * The choices an OpenAI request (checked by `checkOpenAiRequest`) asks for: `n`, and the
 * log-probabilities of chat's `logprobs: true` and `top_logprobs`, or of the legacy
 * completions' `logprobs: k` (the chosen token's and the k most likely).
 */
export function openAiChoices(
  body: Record<string, unknown>,
  endpoint: OpenAiEndpoint,
): ChoiceOptions {
  const n = typeof body.n === 'number' ? body.n : 1;
  if (endpoint === 'chat') {
    const responseFormat = absent(body.response_format)
      ? undefined
      : responseFormatOf(body.response_format, 'response_format');
    return {
      n,
      ...(body.logprobs === true
        ? {
            logprobs: true,
            topLogprobs: typeof body.top_logprobs === 'number' ? body.top_logprobs : 0,
          }
        : {}),
      ...(responseFormat ? { responseFormat } : {}),
    };
  }
  return typeof body.logprobs === 'number'
    ? { n, logprobs: true, topLogprobs: body.logprobs }
    : { n };
}

/** The field a request's token budget came in, for errors that concern it. */
const maxTokensField = (body: Record<string, unknown>) =>
  absent(body.max_tokens) && !absent(body.max_completion_tokens)
    ? 'max_completion_tokens'
    : 'max_tokens';

/**
 * OpenAI's parameters (checked by `checkOpenAiRequest`) in Kiln's terms, as vLLM reads them:
 * `max_tokens` (16), `temperature` (1; 0 means greedy), `top_p`, `seed`, `stop`, and vLLM's
 * `top_k` and `repetition_penalty`. What the request leaves out comes from the model's
 * generation_config.json (`defaults`) first, as vLLM's server takes it; a config with
 * `do_sample: false` and no temperature makes decoding greedy.
 */
export function openAiParameters(
  body: Record<string, unknown>,
  defaults: GenerationDefaults = {},
): GenerationParameters {
  const temperature = body.temperature ?? defaults.temperature;
  const greedy = temperature === 0 || (temperature == null && defaults.doSample === false);
  return parseGenerationParameters(
    {
      max_new_tokens: body.max_tokens ?? body.max_completion_tokens,
      do_sample: !greedy,
      temperature: greedy ? undefined : (temperature ?? 1),
      top_p: body.top_p,
      // -1 keeps every token (vLLM), as Kiln's 0 does, whatever the model's default.
      top_k: body.top_k === -1 ? 0 : body.top_k,
      repetition_penalty: body.repetition_penalty,
      seed: body.seed,
      stop: body.stop,
    },
    { ...defaults, maxNewTokens: defaults.maxNewTokens ?? 16 },
  );
}

/**
 * An error of the generation in OpenAI's terms: Kiln's `max_new_tokens` is the request's
 * `max_tokens` (or `max_completion_tokens`), and the error names it.
 */
export function inOpenAiTerms(error: unknown, body: Record<string, unknown>): unknown {
  if (!KilnError.is(error, KilnErrorCode.InvalidInput) || !error.message.includes('max_new_tokens'))
    return error;
  const field = maxTokensField(body);
  const tooLong = /exceeds the model's limit/.test(error.message);
  return openAiFieldError(
    field,
    tooLong ? 'context_length_exceeded' : 'invalid_value',
    error.message.replaceAll('max_new_tokens', field),
  );
}
