import fs from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import OpenAI, { BadRequestError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel } from '@kiln/model-tools';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = tempDir('response-format');
  // Random weights over a character vocabulary with an end of text: whatever the model
  // would write, the sampler keeps it to the format.
  const gpt = await gptDecoderModel(path.join(root, 'gpt'), {
    layers: 1,
    hidden: 32,
    heads: 2,
    maxLen: 1024,
    vocab: defaultCharVocab(),
    seed: 11,
    properties: { 'option.max_rolling_batch_size': '8' },
  });
  fs.writeFileSync(
    path.join(gpt.dir, 'tokenizer_config.json'),
    JSON.stringify({
      chat_template:
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
    }),
  );
  t = await startTestServer({ models: [`gpt=${gpt.dir}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const client = () => new OpenAI({ baseURL: `${t.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
const ajv = new Ajv({ strict: false });

/** A sampled chat answer under a response format, its text and why it ended. */
async function answer(
  format: OpenAI.ChatCompletionCreateParams['response_format'],
  seed: number,
  n = 1,
) {
  const completion = await client().chat.completions.create({
    model: 'gpt',
    messages: [{ role: 'user', content: 'Describe a person as JSON.' }],
    response_format: format,
    max_completion_tokens: 900,
    temperature: 1,
    seed,
    n,
  });
  return completion.choices.map((c) => ({ text: c.message.content!, reason: c.finish_reason }));
}

/** Schemas of bounded size: objects of strings, integers, enums, booleans, arrays, nested. */
const key = fc.stringMatching(/^[a-z]{1,6}$/);
const leaf = fc.oneof(
  fc.constant({ type: 'boolean' }),
  fc.constant({ type: 'null' }),
  fc
    .tuple(fc.integer({ min: -50, max: 50 }), fc.integer({ min: 0, max: 100 }))
    .map(([minimum, span]) => ({ type: 'integer', minimum, maximum: minimum + span })),
  fc
    .tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 5 }))
    .map(([minLength, extra]) => ({ type: 'string', minLength, maxLength: minLength + extra })),
  fc.uniqueArray(key, { minLength: 1, maxLength: 3 }).map((values) => ({ enum: values })),
);
const array = fc
  .tuple(leaf, fc.integer({ min: 0, max: 3 }))
  .map(([items, maxItems]) => ({ type: 'array', items, maxItems }));
const object = (value: fc.Arbitrary<object>) =>
  fc
    .uniqueArray(fc.tuple(key, value), { minLength: 1, maxLength: 4, selector: ([k]) => k })
    .chain((entries) =>
      fc.subarray(entries.map(([k]) => k)).map((required) => ({
        type: 'object',
        properties: Object.fromEntries(entries),
        required,
      })),
    );
const schema = object(fc.oneof(leaf, array, object(fc.oneof(leaf, array))));

describe('response_format over the official openai client', () => {
  it('json_schema: every answer that ends at its end token parses and validates', async () => {
    let ended = 0;
    await fc.assert(
      fc.asyncProperty(schema, fc.integer({ min: 0, max: 1000 }), async (s, seed) => {
        const [{ text, reason }] = (await answer(
          { type: 'json_schema', json_schema: { name: 'person', schema: s, strict: true } },
          seed,
        )) as [{ text: string; reason: string }];
        if (reason === 'length') return;
        ended++;
        expect(reason).toBe('stop');
        const value: unknown = JSON.parse(text);
        expect(ajv.validate(s, value), `${text}\n${ajv.errorsText()}`).toBe(true);
      }),
      { numRuns: 25, seed: 36 },
    );
    // The bounds keep the answers short: nearly all of them end at the end token.
    expect(ended).toBeGreaterThanOrEqual(20);
  }, 240_000);

  it('json_object answers a JSON object, n choices each, and in a stream', async () => {
    const choices = await answer({ type: 'json_object' }, 5, 3);
    for (const { text, reason } of choices.filter((c) => c.reason === 'stop')) {
      expect(reason).toBe('stop');
      const value: unknown = JSON.parse(text);
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
    }
    const format = {
      type: 'json_schema' as const,
      json_schema: {
        name: 'pet',
        schema: {
          type: 'object',
          properties: {
            kind: { enum: ['cat', 'dog'] },
            age: { type: 'integer', minimum: 0, maximum: 20 },
          },
          required: ['kind', 'age'],
        },
      },
    };
    const request = {
      model: 'gpt',
      messages: [{ role: 'user' as const, content: 'A pet, please.' }],
      response_format: format,
      max_completion_tokens: 200,
      seed: 2,
    };
    const stream = await client().chat.completions.create({ ...request, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(ajv.validate(format.json_schema.schema, JSON.parse(text))).toBe(true);
    // The same request answered whole gives the same text.
    const whole = await client().chat.completions.create(request);
    expect(whole.choices[0]!.message.content).toBe(text);
  }, 60_000);

  it('refuses a schema XGrammar cannot compile with a 400 naming response_format', async () => {
    for (const schema of [
      { type: 5 },
      { $ref: '#/definitions/none' },
      { type: 'string', pattern: '[a-' },
    ]) {
      const error = await answer(
        { type: 'json_schema', json_schema: { name: 'bad', schema } },
        1,
      ).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BadRequestError);
      expect(error).toMatchObject({ status: 400, param: 'response_format' });
      expect((error as BadRequestError).message).not.toMatch(/\.cc|\/Users|\/home|\/work/);
    }
    // The model still answers.
    const [ok] = await answer({ type: 'json_object' }, 3);
    expect(ok!.text.length).toBeGreaterThan(0);
  }, 60_000);
});
