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
if (noTorch) console.warn(`skipping serving a transformers.js Llama folder: ${noTorch}`);

const PROMPTS = ['Hello, ', 'The quick brown fox', 'a'];
const NEW_TOKENS = 16;
const chars = defaultCharVocab();
const encode = (text: string) => [...text].map((c) => chars.indexOf(c));

let t: TestServer;
let root: string;
let model: LlamaDecoderModel;
let vocab: string[];

describe.skipIf(noTorch !== null)('a transformers.js Llama folder over HTTP', () => {
  beforeAll(async () => {
    root = tempDir('generation-llama');
    model = await llamaDecoderModel(path.join(root, 'llama'), {
      greedyPrompts: PROMPTS.map(encode),
      greedyTokens: NEW_TOKENS,
    });
    vocab = JSON.parse(fs.readFileSync(path.join(model.dir, 'vocab.json'), 'utf8')) as string[];
    t = await startTestServer({ models: [`llama=${model.dir}`] });
    await t.settled();
  }, 120_000);

  afterAll(async () => {
    await t?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  it("answers torch's greedy continuation of each prompt, sent at once", async () => {
    const answers = await Promise.all(
      PROMPTS.map(async (inputs) => {
        const response = await fetch(`${t.inference}/predictions/llama`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ inputs, parameters: { max_new_tokens: NEW_TOKENS } }),
        });
        expect(response.status).toBe(200);
        return ((await jsonOf(response)).body as { generated_text: string }).generated_text;
      }),
    );
    // Token 0 ends text: torch's continuation up to it.
    const expected = model.greedy.map((tokens) => {
      const end = tokens.indexOf(0);
      return (end < 0 ? tokens : tokens.slice(0, end)).map((id) => vocab[id]).join('');
    });
    for (const text of expected) expect(text.length).toBeGreaterThan(4);
    expect(answers).toEqual(expected);
  });
});
