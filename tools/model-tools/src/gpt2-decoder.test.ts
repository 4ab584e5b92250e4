import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTextTokenizer } from '@kiln/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpt2DecoderModel } from './gpt2-decoder.js';
import { decodeOnnxModel } from './save-model.js';
import { pythonTorchUnavailable } from './tiny-gpt.js';

const unavailable = pythonTorchUnavailable();
if (unavailable) console.warn(`skipping the GPT-2 decoder export: ${unavailable}`);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-gpt2-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe.skipIf(unavailable !== null)('gpt2DecoderModel', () => {
  it("writes transformers.js's GPT-2 folder with Optimum's inputs and outputs", async () => {
    const model = await gpt2DecoderModel(join(root, 'gpt2'), {
      hidden: 32,
      heads: 2,
      vocab: 300,
      greedyPrompts: [[1, 2, 3]],
      greedyTokens: 4,
    });
    const config = JSON.parse(await readFile(join(model.dir, 'config.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(config).toMatchObject({
      model_type: 'gpt2',
      n_layer: 2,
      n_head: 2,
      n_embd: 32,
      n_positions: 128,
      vocab_size: 300,
      bos_token_id: 256,
      eos_token_id: 256,
    });
    const graph = decodeOnnxModel(await readFile(join(model.dir, 'onnx', 'model.onnx'))).graph!;
    expect(graph.input!.map((i) => i.name)).toEqual([
      'input_ids',
      'attention_mask',
      'position_ids',
      'past_key_values.0.key',
      'past_key_values.0.value',
      'past_key_values.1.key',
      'past_key_values.1.value',
    ]);
    expect(graph.output!.map((o) => o.name)).toEqual([
      'logits',
      'present.0.key',
      'present.0.value',
      'present.1.key',
      'present.1.value',
    ]);
    expect(model.greedy).toHaveLength(1);
    expect(model.greedy[0]).toHaveLength(4);
    const tokenizer = await loadTextTokenizer(model.dir);
    expect(tokenizer.vocabSize).toBe(300);
    expect(tokenizer.eosTokenId).toBe(256);
    const text = 'the heat \u{1F642}  \u65E5\u672C';
    expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
  });
});
