import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type LlamaDecoderModel,
  defaultCharVocab,
  llamaDecoderModel,
  pythonTorchUnavailable,
} from '@kiln/model-tools';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

const noTorch = pythonTorchUnavailable();
if (noTorch) console.warn(`skipping option.model_id and bare decoder folders: ${noTorch}`);

const PROMPT = 'The quick brown fox';
const NEW_TOKENS = 12;
const chars = defaultCharVocab();
const HUB_ID = 'TinyLlama/TinyLlama-1.1B-Chat-v1.0';

let t: TestServer;
let root: string;
let store: string;
let model: LlamaDecoderModel;
let expected: string;

/** A model folder holding only a serving.properties. */
function pointer(name: string, properties: string): string {
  const dir = path.join(store, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'serving.properties'), properties);
  return dir;
}

async function generate(model: string): Promise<{ status: number; body: unknown }> {
  return jsonOf(
    await fetch(`${t.inference}/predictions/${model}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: PROMPT, parameters: { max_new_tokens: NEW_TOKENS } }),
    }),
  );
}

describe.skipIf(noTorch !== null)('option.model_id and bare transformers.js folders', () => {
  beforeAll(async () => {
    root = tempDir('model-id');
    store = path.join(root, 'store');
    model = await llamaDecoderModel(path.join(store, 'tinyllama'), {
      greedyPrompts: [[...PROMPT].map((c) => chars.indexOf(c))],
      greedyTokens: NEW_TOKENS,
    });
    // As transformers.js and Optimum leave it: config.json, onnx/, a tokenizer, no settings.
    fs.rmSync(path.join(model.dir, 'serving.properties'));
    const vocab = JSON.parse(fs.readFileSync(path.join(model.dir, 'vocab.json'), 'utf8'));
    const greedy = model.greedy[0]!;
    const end = greedy.indexOf(0);
    expected = (end < 0 ? greedy : greedy.slice(0, end)).map((id) => vocab[id]).join('');
    pointer('chat', 'option.model_id=../tinyllama\noption.max_rolling_batch_size=4\n');
    pointer('hub', `option.rolling_batch=auto\noption.model_id=${HUB_ID}\n`);
    pointer('remote', 'option.model_id=s3://models/llama/\n');
    // `kiln serve <folder>`: the folder alone, named after itself.
    t = await startTestServer({
      models: [model.dir, `chat=${path.join(store, 'chat')}`, `hub=${path.join(store, 'hub')}`],
      config: { model_store: store },
    });
    await t.settled();
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("serves a folder without serving.properties as text generation: torch's greedy text", async () => {
    expect(expected.length).toBeGreaterThan(4);
    const answer = await generate('tinyllama');
    expect(answer).toMatchObject({ status: 200, body: { generated_text: expected } });
    const described = await jsonOf(await t.manage('/models/tinyllama'));
    expect(described.body).toMatchObject([{ status: 'Healthy' }]);
  });

  it("reads the model's files from the folder option.model_id names, relative to its own", async () => {
    expect(await generate('chat')).toMatchObject({
      status: 200,
      body: { generated_text: expected },
    });
  });

  it('fails a Hub id with no local folder, saying downloads are not available here', async () => {
    const ping = await jsonOf(await fetch(`${t.inference}/ping`));
    const hub = (ping.body as Record<string, { status: string; error?: string }>).hub!;
    expect(hub.status).toBe('FAILED');
    expect(hub.error).toContain(
      `option.model_id=${HUB_ID} looks like a Hugging Face Hub id and names no local folder: Hugging Face Hub and remote downloads are not available on this server; download the model folder and point option.model_id at it`,
    );
    expect(hub.error).not.toMatch(/tokenizer/i);
    expect(JSON.stringify(ping.body)).not.toContain(root);
  });

  it('refuses a remote option.model_id on registration, and a folder outside the model store', async () => {
    const remote = await jsonOf(
      await t.manage('/models?url=remote&model_name=remote&synchronous=true', { method: 'POST' }),
    );
    expect(remote.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(remote.body)).toContain(
      'option.model_id=s3://models/llama/ is a remote location: Hugging Face Hub and remote downloads are not available on this server',
    );
    const outside = path.join(root, 'outside');
    fs.cpSync(model.dir, outside, { recursive: true });
    pointer('escape', 'option.model_id=../../outside\n');
    const escape = await jsonOf(
      await t.manage('/models?url=escape&model_name=escape&synchronous=true', { method: 'POST' }),
    );
    expect(escape.status).toBe(403);
    expect(JSON.stringify(escape.body)).toContain(
      'option.model_id=../../outside names a folder outside the model store',
    );
  });
});
