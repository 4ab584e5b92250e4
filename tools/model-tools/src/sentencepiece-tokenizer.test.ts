import { BpeTokenizer } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import {
  SENTENCEPIECE_BOS_ID,
  SENTENCEPIECE_SPACE,
  sentencePieceTokenizerJson,
} from './sentencepiece-tokenizer.js';
import { kjvTextUnavailable } from './tiny-gpt.js';

const noKjv = kjvTextUnavailable();
if (noKjv) console.warn(`skipping the King James Bible's SentencePiece vocabulary: ${noKjv}`);

interface Json {
  model: { vocab: Record<string, number>; merges: string[] };
}

/** Checks what every vocabulary must be: exactly `size` ids, each merge of pieces before it. */
function expectWellFormed(json: Json, size: number): void {
  const { vocab, merges } = json.model;
  const ids = Object.values(vocab).sort((a, b) => a - b);
  expect(ids).toEqual(Array.from({ length: size }, (_, i) => i));
  expect(vocab['<0x00>']).toBe(3);
  expect(vocab['<0xFF>']).toBe(258);
  for (const merge of merges) {
    const [a, b] = merge.split(' ') as [string, string];
    expect(vocab[a]).toBeLessThan(vocab[a + b]!);
    expect(vocab[b]).toBeLessThan(vocab[a + b]!);
  }
}

const TEXT = 'in the beginning was the word\nand the word was with god';

describe('sentencePieceTokenizerJson', () => {
  it('fills the vocabulary past the merges a small text has, every piece decodable', () => {
    const json = sentencePieceTokenizerJson(600, TEXT) as Json;
    expectWellFormed(json, 600);
    const tokenizer = BpeTokenizer.fromJson(json, { eos_token: '</s>' });
    expect(tokenizer.vocabSize).toBe(600);
    const first = 3 + 256;
    for (let id = first; id < 600; id++) {
      const text = tokenizer.decode([id]);
      // Only ▁ alone decodes to nothing: the decoder strips the space it prepends.
      if (id !== json.model.vocab[SENTENCEPIECE_SPACE]) expect(text).not.toBe('');
    }
  });

  it('adds <s>, spells unknown characters in bytes, and decodes to the text', () => {
    const tokenizer = BpeTokenizer.fromJson(sentencePieceTokenizerJson(400, TEXT), {
      eos_token: '</s>',
    });
    expect(tokenizer.eosTokenId).toBe(2);
    const text = 'the word   was \u{1F642} \u65E5\u672C\nwith\tgod';
    const ids = tokenizer.encode(text);
    expect(ids[0]).toBe(SENTENCEPIECE_BOS_ID);
    // 🙂 in four byte tokens: <0xF0> is 3 + 0xF0.
    expect(ids).toContain(3 + 0xf0);
    expect(tokenizer.decode(ids)).toBe(text);
    // Frequent words are one piece each: ▁the, ▁word.
    expect(tokenizer.encode('the word', { addSpecialTokens: false })).toHaveLength(2);
  });

  it('refuses a vocabulary too small for the bytes and characters', () => {
    expect(() => sentencePieceTokenizerJson(270, TEXT)).toThrow(/at least \d+ tokens/);
  });

  it.skipIf(noKjv !== null)(
    "trains Llama's 32000 pieces on the King James Bible in seconds",
    () => {
      const started = performance.now();
      const json = sentencePieceTokenizerJson(32000) as Json;
      expect(performance.now() - started).toBeLessThan(20_000);
      expectWellFormed(json, 32000);
      expect(json.model.vocab[`${SENTENCEPIECE_SPACE}the`]).toBeDefined();
      const tokenizer = BpeTokenizer.fromJson(json, { eos_token: '</s>' });
      const text = 'In the beginning God created the heaven and the earth.';
      expect(tokenizer.encode(text, { addSpecialTokens: false }).length).toBeLessThan(14);
    },
  );
});
