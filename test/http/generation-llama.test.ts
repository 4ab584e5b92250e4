import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BpeTokenizer } from '@kiln/core';
import {
  type LlamaDecoderModel,
  byteBpeTokenizerJson,
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
const BPE_VOCAB = 320;
const bpe = BpeTokenizer.fromJson(byteBpeTokenizerJson(BPE_VOCAB));

let t: TestServer;
let root: string;
let model: LlamaDecoderModel;
let bpeModel: LlamaDecoderModel;
let vocab: string[];

describe.skipIf(noTorch !== null)('a transformers.js Llama folder over HTTP', () => {
  beforeAll(async () => {
    root = tempDir('generation-llama');
    model = await llamaDecoderModel(path.join(root, 'llama'), {
      greedyPrompts: PROMPTS.map(encode),
      greedyTokens: NEW_TOKENS,
    });
    vocab = JSON.parse(fs.readFileSync(path.join(model.dir, 'vocab.json'), 'utf8')) as string[];
    bpeModel = await llamaDecoderModel(path.join(root, 'llama-bpe'), {
      vocab: BPE_VOCAB,
      tokenizer: 'byte-bpe',
      seed: 5,
      greedyPrompts: PROMPTS.map((p) => bpe.encode(p)),
      greedyTokens: NEW_TOKENS,
    });
    t = await startTestServer({ models: [`llama=${model.dir}`, `llama-bpe=${bpeModel.dir}`] });
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

  it("answers the text of torch's greedy tokens from the byte-level BPE folder", async () => {
    const answers = await Promise.all(
      PROMPTS.map(async (inputs) => {
        const response = await fetch(`${t.inference}/predictions/llama-bpe`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ inputs, parameters: { max_new_tokens: NEW_TOKENS } }),
        });
        expect(response.status).toBe(200);
        const body = (await jsonOf(response)).body as {
          generated_text: string;
          details: { generated_tokens: number };
        };
        return { text: body.generated_text, count: body.details.generated_tokens };
      }),
    );
    // The end-of-text token (256) ends a generation.
    const expected = bpeModel.greedy.map((tokens) => {
      const end = tokens.indexOf(256);
      return end < 0 ? tokens : tokens.slice(0, end);
    });
    for (const tokens of expected) expect(tokens.length).toBeGreaterThan(4);
    expect(answers.map((a) => a.count)).toEqual(expected.map((tokens) => tokens.length));
    // Random tokens may end inside a character: the answer leaves those last bytes out.
    expect(answers.map((a) => a.text)).toEqual(
      expected.map((tokens) => bpe.decode(tokens).replace(/\uFFFD+$/, '')),
    );
  });
});
