import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel } from '@kiln/model-tools';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

let t: TestServer;
let root: string;
let plainDir: string;

/** A template with a marker per turn, its bos and eos texts, and a place for tools. */
const CHAT_TEMPLATE =
  '{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}\n{% endfor %}' +
  '{% if tools %}[tools:{% for tool in tools %} {{ tool.function.name }}{% endfor %}]\n{% endif %}' +
  '{% if add_generation_prompt %}<assistant>{% endif %}';

beforeAll(async () => {
  root = tempDir('generation-templates');
  // Two copies of one decoder (same seed): one as Hugging Face folders carry it, with a chat
  // template and generation defaults, and one without either.
  const options = {
    layers: 2,
    hidden: 32,
    heads: 2,
    maxLen: 512,
    // No end-of-text token: a generation ends at its length or at generation_config's ends.
    vocab: defaultCharVocab().slice(1),
    properties: { 'option.max_rolling_batch_size': '4' },
  };
  const chat = await gptDecoderModel(path.join(root, 'chat'), options);
  plainDir = (await gptDecoderModel(path.join(root, 'plain'), options)).dir;
  fs.writeFileSync(
    path.join(chat.dir, 'tokenizer_config.json'),
    JSON.stringify({ chat_template: CHAT_TEMPLATE, bos_token: '^', eos_token: '$' }),
  );
  fs.writeFileSync(
    path.join(chat.dir, 'generation_config.json'),
    JSON.stringify({ max_new_tokens: 9, do_sample: false }),
  );
  t = await startTestServer({
    models: [`chat=${chat.dir}`, `plain=${plainDir}`],
    // Registered later: a copy with generation_config.json's end tokens.
    config: { model_store: root },
  });
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
    body: JSON.stringify(body),
  });

interface Completion {
  choices: { text?: string; message?: { content: string }; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

const completion = async (route: string, body: unknown) => {
  const { status, body: answer } = await jsonOf(await post(route, body));
  expect(status).toBe(200);
  return answer as Completion;
};

/** The greedy text the same weights continue `prompt` with, given as a plain completion. */
const plainGreedy = async (prompt: string, maxTokens: number) =>
  (
    await completion('/v1/completions', {
      model: 'plain',
      prompt,
      max_tokens: maxTokens,
      temperature: 0,
    })
  ).choices[0]!.text;

describe('Hugging Face folder files', () => {
  it("renders chat completions with the model's chat template, tools included", async () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi!' },
    ];
    const rendered = '^<system>Be brief.$\n<user>Hi!$\n<assistant>';
    const chat = await completion('/v1/chat/completions', {
      model: 'chat',
      messages,
      max_tokens: 12,
      temperature: 0,
    });
    // One token a character: the prompt is the rendered template, every character of it.
    expect(chat.usage.prompt_tokens).toBe(rendered.length);
    expect(chat.choices[0]!.message!.content).toBe(await plainGreedy(rendered, 12));

    const tools = [{ type: 'function', function: { name: 'lookup', parameters: {} } }];
    const withTools = await completion('/v1/chat/completions', {
      model: 'chat',
      messages,
      tools,
      max_tokens: 4,
      temperature: 0,
    });
    expect(withTools.usage.prompt_tokens).toBe(
      '^<system>Be brief.$\n<user>Hi!$\n[tools: lookup]\n<assistant>'.length,
    );

    // Without a template: the plain one, and no place for tools.
    const plain = await completion('/v1/chat/completions', {
      model: 'plain',
      messages: [{ role: 'user', content: 'Hi!' }],
      max_tokens: 2,
    });
    expect(plain.usage.prompt_tokens).toBe('user: Hi!\nassistant: '.length);
    const refused = await jsonOf(
      await post('/v1/chat/completions', { model: 'plain', messages, tools }),
    );
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: { param: 'tools' } });
    expect(expectCleanError(refused.body)).toMatch(/no place for tools/);
  });

  it("applies generation_config.json's defaults unless the request sets them", async () => {
    const lmi = async (parameters?: object) => {
      const { status, body } = await jsonOf(
        await post('/predictions/chat', { inputs: 'Hello', ...(parameters ? { parameters } : {}) }),
      );
      expect(status).toBe(200);
      return body as { generated_text: string; details: { generated_tokens: number } };
    };
    expect((await lmi()).details.generated_tokens).toBe(9);
    expect((await lmi({ max_new_tokens: 3 })).details.generated_tokens).toBe(3);
    // do_sample false: greedy unless the request samples, over OpenAI's route as well.
    const greedy = await plainGreedy('Hello', 9);
    expect((await lmi()).generated_text).toBe(greedy);
    const openAi = await completion('/v1/completions', { model: 'chat', prompt: 'Hello' });
    expect(openAi.usage.completion_tokens).toBe(9);
    expect(openAi.choices[0]!.text).toBe(greedy);
    const sampled = await lmi({ do_sample: true, temperature: 5, seed: 1, max_new_tokens: 9 });
    expect(sampled.generated_text).not.toBe(greedy);
  });

  it('ends a sequence at any eos_token_id generation_config.json lists', async () => {
    // The greedy continuation of the plain copy, token by token.
    const lines = (
      await (
        await post('/predictions/plain', {
          inputs: 'Hello, ',
          parameters: { max_new_tokens: 20 },
          stream: true,
        })
      ).text()
    )
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { token: { id: number } | null });
    const tokens = lines.flatMap((l) => (l.token ? [l.token.id] : []));
    const distinct = [...new Set(tokens)];
    expect(distinct.length).toBeGreaterThanOrEqual(4);
    const [later, sooner] = [distinct[3]!, distinct[2]!];
    const endsDir = path.join(root, 'ends');
    fs.cpSync(plainDir, endsDir, { recursive: true });
    fs.writeFileSync(
      path.join(endsDir, 'generation_config.json'),
      JSON.stringify({ eos_token_id: [later, sooner] }),
    );
    const registered = await t.manage('/models?url=ends&model_name=ends&synchronous=true', {
      method: 'POST',
    });
    expect(registered.status).toBe(200);
    const { body } = await jsonOf(
      await post('/predictions/ends', { inputs: 'Hello, ', parameters: { max_new_tokens: 20 } }),
    );
    expect(body).toMatchObject({
      details: { finish_reason: 'eos', generated_tokens: tokens.indexOf(sooner) },
    });
  });
});
