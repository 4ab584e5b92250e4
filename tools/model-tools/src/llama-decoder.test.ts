import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadTextTokenizer } from '@kiln/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LLAMA_MODEL_FILE, llamaDecoderModel } from './llama-decoder.js';
import { decodeOnnxModel } from './save-model.js';
import { kjvTextUnavailable, pythonTorchUnavailable } from './tiny-gpt.js';

const unavailable = pythonTorchUnavailable();
if (unavailable) console.warn(`skipping the Llama decoder export: ${unavailable}`);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-llama-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe.skipIf(unavailable !== null)('llamaDecoderModel', () => {
  it("writes transformers.js's folder with Optimum's inputs and outputs", async () => {
    const model = await llamaDecoderModel(join(root, 'plain'), {
      hidden: 32,
      vocab: 128,
      greedyPrompts: [[1, 2, 3]],
      greedyTokens: 4,
    });
    const config = JSON.parse(await readFile(join(model.dir, 'config.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(config).toMatchObject({
      model_type: 'llama',
      hidden_size: 32,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      num_hidden_layers: 2,
      vocab_size: 128,
      max_position_embeddings: 128,
      eos_token_id: 0,
    });
    const vocab = JSON.parse(await readFile(join(model.dir, 'vocab.json'), 'utf8')) as string[];
    expect(vocab).toHaveLength(128);
    // A character vocabulary: one character a token past the end-of-text token, no repeats.
    expect(new Set(vocab).size).toBe(128);
    for (const text of vocab.slice(1)) expect([...text]).toHaveLength(1);
    const graph = decodeOnnxModel(await readFile(join(model.dir, LLAMA_MODEL_FILE))).graph!;
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
    for (const token of model.greedy[0]!) expect(token).toBeLessThan(128);
  });

  it('writes a byte-level BPE tokenizer.json whose every token encodes and decodes', async () => {
    const model = await llamaDecoderModel(join(root, 'bpe'), {
      hidden: 32,
      vocab: 320,
      tokenizer: 'byte-bpe',
    });
    expect(model.endOfText).toBe(256);
    const config = JSON.parse(await readFile(join(model.dir, 'config.json'), 'utf8')) as {
      eos_token_id: number;
    };
    expect(config.eos_token_id).toBe(256);
    const tokenizer = await loadTextTokenizer(model.dir);
    expect(tokenizer.vocabSize).toBe(320);
    expect(tokenizer.eosTokenId).toBe(256);
    const text = 'the heat, then ÿ and 日本';
    const ids = tokenizer.encode(text);
    // Merged pairs make the text shorter in tokens than in bytes.
    expect(ids.length).toBeLessThan(Buffer.byteLength(text));
    expect(ids.some((id) => id > 256)).toBe(true);
    expect(tokenizer.decode(ids)).toBe(text);
    for (let id = 257; id < 320; id++)
      expect(tokenizer.encode(tokenizer.decode([id]))).toEqual([id]);
  });

  it.skipIf(kjvTextUnavailable() !== null)(
    "writes Llama 2's kind of tokenizer: <s> added, </s> ends text, a chat template",
    async () => {
      const model = await llamaDecoderModel(join(root, 'sentencepiece'), {
        hidden: 32,
        vocab: 700,
        tokenizer: 'sentencepiece',
      });
      expect(model).toMatchObject({ beginOfText: 1, endOfText: 2, vocabSize: 700 });
      const read = async (file: string) =>
        JSON.parse(await readFile(join(model.dir, file), 'utf8')) as Record<string, unknown>;
      expect(await read('config.json')).toMatchObject({ bos_token_id: 1, eos_token_id: 2 });
      expect(await read('generation_config.json')).toEqual({ bos_token_id: 1, eos_token_id: 2 });
      expect(await read('tokenizer_config.json')).toMatchObject({
        add_bos_token: true,
        bos_token: '<s>',
        eos_token: '</s>',
        chat_template: expect.stringContaining('add_generation_prompt'),
      });
      const tokenizer = await loadTextTokenizer(model.dir);
      expect(tokenizer.vocabSize).toBe(700);
      expect(tokenizer.eosTokenId).toBe(2);
      const text = 'And God said, Let there be light \u{1F31E}';
      const ids = tokenizer.encode(text);
      expect(ids[0]).toBe(1);
      expect(tokenizer.decode(ids)).toBe(text);
    },
  );

  it('refuses a byte-level BPE vocabulary too small for the bytes and end of text', async () => {
    await expect(
      llamaDecoderModel(join(root, 'small'), { tokenizer: 'byte-bpe', vocab: 256 }),
    ).rejects.toThrow(/at least 257/);
  });

  it('keeps the weights in model.onnx_data when asked', async () => {
    const model = await llamaDecoderModel(join(root, 'external'), {
      hidden: 32,
      vocab: 128,
      externalData: true,
    });
    const graph = decodeOnnxModel(await readFile(join(model.dir, LLAMA_MODEL_FILE))).graph!;
    const dataBytes = (await stat(join(model.dir, `${LLAMA_MODEL_FILE}_data`))).size;
    const weights = graph.initializer!;
    expect(weights.length).toBeGreaterThan(0);
    for (const tensor of weights) expect(tensor.rawData ?? []).toHaveLength(0);
    const lengths = weights.map((t) =>
      Number(t.externalData!.find((e) => e.key === 'length')!.value),
    );
    expect(lengths.reduce((a, b) => a + b)).toBe(dataBytes);
    // Embeddings alone are 128 × 32 floats.
    expect(dataBytes).toBeGreaterThan(128 * 32 * 4);
  });
});
