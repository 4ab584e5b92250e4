import net from 'node:net';
import fc from 'fast-check';
import { request } from './hostile-cases.js';
import { type PhaseTally, count, inLanes, newTally } from './phase-tally.js';
import { isJson, send, unexpected5xx } from './storm.js';

interface GenerationCase {
  readonly kind: string;
  readonly bytes: Buffer;
  /** Hang up after the first bytes of the answer arrive. */
  readonly disconnect?: boolean;
  /** A refusal is due at once: one slower than the storm's refusal bound counts as a hang. */
  readonly refusal?: boolean;
}

const json = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  request({
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json', ...headers },
    body: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
  });

/** A value of any JSON type, often the wrong one for the field it fills. */
const anyValue = fc.oneof(
  fc.integer({ min: -3, max: 40 }),
  fc.constantFrom(0.5, 1e308, -0, 2 ** 53, 'true', 'auto', '', null, true, false),
  fc.string({ maxLength: 12 }),
  fc.array(fc.oneof(fc.string({ maxLength: 4 }), fc.integer()), { maxLength: 5 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.oneof(fc.string({ maxLength: 4 }), fc.integer()), {
    maxKeys: 3,
  }),
);

/** OpenAI's, TGI's and DJL's generation fields, implemented by Kiln or not. */
const FIELDS = [
  'max_tokens',
  'max_completion_tokens',
  'max_new_tokens',
  'temperature',
  'top_p',
  'top_k',
  'n',
  'stream',
  'stream_options',
  'stop',
  'seed',
  'best_of',
  'echo',
  'logprobs',
  'top_logprobs',
  'tools',
  'tool_choice',
  'response_format',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'logit_bias',
  'user',
  'suffix',
  'do_sample',
  'details',
  'parameters',
  'unknown_field',
];

/** A few fields drawn from FIELDS, each with a random value; token counts stay small. */
const fields = fc
  .uniqueArray(fc.tuple(fc.constantFrom(...FIELDS), anyValue), {
    maxLength: 4,
    selector: ([k]) => k,
  })
  .map((pairs) =>
    Object.fromEntries(
      pairs.map(([k, v]) => [k, /max_/.test(k) && typeof v === 'number' ? Math.min(v, 32) : v]),
    ),
  );

function generationCases(
  model: string,
  limits: { maxRequestSize: number; maxPromptBytes: number },
): fc.Arbitrary<GenerationCase> {
  const prompt = fc.oneof(fc.string({ maxLength: 40 }), anyValue);
  const openAi = fc.record({ prompt, extra: fields }).map(({ prompt: p, extra }) => ({
    kind: 'openai completion parameters',
    bytes: json('/v1/completions', { model, prompt: p, max_tokens: 8, ...extra }),
  }));
  const chat = fc
    .record({
      content: prompt,
      role: fc.constantFrom('user', 'system', 'assistant', 'tool', 'robot'),
      extra: fields,
    })
    .map(({ content, role, extra }) => ({
      kind: 'openai chat parameters',
      bytes: json('/v1/chat/completions', {
        model,
        messages: [{ role, content }],
        max_tokens: 8,
        ...extra,
      }),
    }));
  const v2 = fc
    .record({ text: prompt, parameters: fc.oneof(fields, anyValue), stream: fc.boolean() })
    .map(({ text, parameters, stream }) => ({
      kind: 'v2 generate parameters',
      bytes: json(`/v2/models/${model}/generate${stream ? '_stream' : ''}`, {
        text_input: text,
        parameters,
      }),
    }));
  const lmi = fc.record({ inputs: prompt, parameters: fc.oneof(fields, anyValue) }).map((b) => ({
    kind: 'predictions generation parameters',
    bytes: json(`/predictions/${model}`, b),
  }));
  const notJson = fc
    .record({
      path: fc.constantFrom(
        '/v1/completions',
        '/v1/chat/completions',
        `/v2/models/${model}/generate`,
      ),
      text: fc.string({ maxLength: 60 }),
    })
    .map(({ path, text }) => ({ kind: 'generation body not JSON', bytes: json(path, text) }));
  // Prompts just under the request limit (refused by their bytes before any tokenizing) and
  // just under max_prompt_bytes (tokenized, then refused by the model's context length).
  const longPrompt = fc
    .record({
      path: fc.constantFrom('/v1/completions', `/predictions/${model}`),
      bytes: fc.constantFrom(limits.maxRequestSize - 200, limits.maxPromptBytes - 100),
    })
    .map(({ path, bytes }) => ({
      kind: 'long prompt',
      bytes: longPromptRequest(path, model, bytes),
      refusal: true,
    }));
  // A body far over the limit, announced by its Content-Length: refused before it is read.
  const hugeBody = fc.constant({
    kind: 'huge prompt body',
    bytes: request({
      method: 'POST',
      path: '/v1/completions',
      headers: { 'content-type': 'application/json', 'content-length': String(30 * 2 ** 20) },
      body: Buffer.from(`{"model":"${model}","prompt":"${'a'.repeat(64 * 1024)}`),
    }),
    refusal: true,
  });
  const disconnect = fc
    .constantFrom('/v1/completions', `/v2/models/${model}/generate_stream`)
    .map((path) => ({
      kind: 'client gone mid-stream',
      bytes: json(
        path,
        path.startsWith('/v1')
          ? { model, prompt: 'Hang up on me', max_tokens: 64, stream: true }
          : { text_input: 'Hang up on me', parameters: { max_new_tokens: 64 } },
      ),
      disconnect: true,
    }));
  return fc.oneof(
    { arbitrary: openAi, weight: 4 },
    { arbitrary: chat, weight: 3 },
    { arbitrary: v2, weight: 3 },
    { arbitrary: lmi, weight: 2 },
    { arbitrary: notJson, weight: 1 },
    { arbitrary: longPrompt, weight: 1 },
    { arbitrary: hugeBody, weight: 1 },
    { arbitrary: disconnect, weight: 2 },
  );
}

const longPrompts = new Map<string, Buffer>();

/** A request whose prompt is about `promptBytes` long, made once per route and size. */
function longPromptRequest(path: string, model: string, promptBytes: number): Buffer {
  let bytes = longPrompts.get(`${path} ${promptBytes}`);
  if (!bytes) {
    const prompt = 'All work and no play makes a long prompt. '.repeat(
      Math.floor(promptBytes / 42),
    );
    bytes = json(
      path,
      path.startsWith('/v1') ? { model, prompt, max_tokens: 4 } : { inputs: prompt },
    );
    longPrompts.set(`${path} ${promptBytes}`, bytes);
  }
  return bytes;
}

/** Sends a streaming request and hangs up as soon as the answer begins. */
function hangUp(base: string, bytes: Buffer, hangMs: number): Promise<{ ms: number }> {
  const { hostname, port } = new URL(base);
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes));
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ ms: performance.now() - started });
    };
    const timer = setTimeout(done, hangMs);
    socket.once('data', done);
    socket.once('error', done);
    socket.once('close', done);
  });
}

/**
 * Hostile requests on the generation routes (OpenAI, v2 generate, DJL's /predictions):
 * parameters of every type and name, bodies that are not JSON, prompts at and far past the
 * size limit, and clients that hang up mid-stream — with a greedy completion after every
 * `checkEvery` that must give the same text as before the storm.
 */
export async function runGenerationStorm(
  base: string,
  options: {
    model: string;
    maxRequestSize: number;
    maxPromptBytes: number;
    requests: number;
    concurrency: number;
    seed: number;
    checkEvery: number;
    hangMs: number;
    /** A refusal due at once that takes longer counts as a hang. */
    refusalMs: number;
    alive(): boolean;
  },
): Promise<PhaseTally> {
  const tally = newTally();
  const valid = json('/v1/completions', {
    model: options.model,
    prompt: 'The same words each time',
    max_tokens: 12,
    temperature: 0,
  });
  const textOf = (body: string): string | undefined => {
    try {
      return (JSON.parse(body) as { choices: { text: string }[] }).choices[0]!.text;
    } catch {
      return undefined;
    }
  };
  const reference = textOf((await send(base, valid, options.hangMs)).body);
  const checkValid = async () => {
    const answer = await send(base, valid, options.hangMs);
    if (answer.status !== 200 || reference === undefined || textOf(answer.body) !== reference)
      count(tally, 'innocentFailures', {
        kind: 'greedy completion',
        status: answer.status,
        request: valid.toString('latin1'),
        answer: answer.body,
      });
  };
  let seed = options.seed;
  while (tally.requests < options.requests && options.alive()) {
    const cases = fc.sample(generationCases(options.model, options), {
      numRuns: Math.min(options.checkEvery, options.requests - tally.requests),
      seed: seed++,
    });
    let next = 0;
    await inLanes(options.concurrency, async () => {
      while (next < cases.length && options.alive()) {
        const c = cases[next++]!;
        tally.requests++;
        const sample = { kind: c.kind, request: c.bytes.subarray(0, 300).toString('latin1') };
        if (c.disconnect) {
          const { ms } = await hangUp(base, c.bytes, options.hangMs);
          if (ms >= options.hangMs) count(tally, 'hangs', { ...sample, status: 0, answer: '' });
          continue;
        }
        const answer = await send(base, c.bytes, options.hangMs);
        const seen = { ...sample, status: answer.status, answer: answer.body };
        if (answer.refused || !options.alive()) count(tally, 'crashes', seen);
        else if (answer.ms >= options.hangMs || (c.refusal && answer.ms > options.refusalMs))
          count(tally, 'hangs', { ...seen, answer: `${answer.ms.toFixed(0)} ms: ${answer.body}` });
        else if (unexpected5xx(answer.status)) count(tally, 'unexpected5xx', seen);
        else if (answer.status === 0 || (answer.status >= 400 && !isJson(answer.body)))
          count(tally, 'nonJson', seen);
      }
    });
    if (options.alive()) await checkValid();
  }
  return tally;
}
