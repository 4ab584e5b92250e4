import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BpeTokenizer } from './bpe-tokenizer.js';
import { TokenTextStream } from './token-text-stream.js';
import { llamaStyleBpeJson, metaspaceBpeJson, unigramJson } from './test-support/tokenizer-json.js';

const KINDS = {
  'SentencePiece-style BPE with byte fallback (Llama 2 layout)': llamaStyleBpeJson(),
  'SentencePiece-style BPE with byte fallback and Metaspace': metaspaceBpeJson(),
  'Unigram with Metaspace': unigramJson(),
};

/** Texts of emoji, CJK and runs of spaces (none leading: Metaspace keeps one, as in Python). */
const TEXTS = [
  'in the beginning',
  'and   then  the end',
  'euro \u20AC and \u{1F642} \u4E16\u754C \u65E5\u672C',
  'family \u{1F468}\u200D\u{1F469}\u200D\u{1F467} and flags \u{1F1EB}\u{1F1F7}',
  'tabs\tand\nnew lines  ',
];

/** Whether a string has no lone surrogate: half of a character split between pieces. */
const wellFormed = (text: string) => !/\p{Surrogate}/u.test(text);

/** Each piece a stream answers for `ids`, and the flush at the end. */
function streamed(tokenizer: BpeTokenizer, ids: readonly number[]): string[] {
  const stream = new TokenTextStream(tokenizer);
  return [...ids.map((id) => stream.push(id)), stream.flush()];
}

describe.each(Object.entries(KINDS))('%s', (_, json) => {
  const tokenizer = BpeTokenizer.fromJson(json, { eos_token: '</s>' });

  it('loads with its special tokens, end of sequence from tokenizer_config.json', () => {
    expect(tokenizer.eosTokenId).toBe(2);
    expect(tokenizer.vocabSize).toBeGreaterThan(3);
  });

  it('round-trips text its vocabulary or byte fallback covers', () => {
    const bytes = json === KINDS['Unigram with Metaspace'] ? TEXTS.slice(0, 2) : TEXTS;
    for (const text of bytes) expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
  });

  it('streams text that joins to the decoded text, never splitting a character', () => {
    for (const text of TEXTS) {
      const ids = tokenizer.encode(text);
      const pieces = streamed(tokenizer, ids);
      expect(pieces.join('')).toBe(tokenizer.decode(ids));
      for (const piece of pieces) {
        expect(piece).not.toContain('\uFFFD');
        expect(wellFormed(piece)).toBe(true);
      }
    }
  });
});

describe('byte fallback', () => {
  const tokenizer = BpeTokenizer.fromJson(llamaStyleBpeJson(), { eos_token: '</s>' });
  // The fixture's byte tokens <0x00>…<0xFF> follow <unk>, <s> and </s>.
  const byte = (b: number) => [3 + b];

  it('spells a character outside the vocabulary in byte tokens, shown whole when complete', () => {
    const ids = tokenizer.encode('\u20AC', { addSpecialTokens: false });
    // ▁ then <0xE2><0x82><0xAC>.
    expect(ids).toHaveLength(4);
    expect(streamed(tokenizer, ids)).toEqual(['', '', '', '\u20AC', '']);
  });

  it('holds a split character behind tokens that show nothing, however many', () => {
    const bytes = [...Buffer.from('\u{1F642}', 'utf8')];
    // Skipped special tokens first: they add no text, and must not let the bytes out early.
    const ids = [1, 1, 1, ...bytes.flatMap(byte)];
    expect(ids).toHaveLength(3 + 4);
    const pieces = streamed(tokenizer, ids);
    expect(pieces.join('')).toBe('\u{1F642}');
    expect(pieces.filter((p) => p !== '')).toEqual(['\u{1F642}']);
  });

  it('lets a byte sequence that never completes through as U+FFFD at the end', () => {
    const pieces = streamed(tokenizer, [...byte(0xe2), ...byte(0x82)]);
    expect(pieces.slice(0, 2)).toEqual(['', '']);
    expect(pieces[2]).toContain('\uFFFD');
  });

  it('streams any text as its decoded text, character by character whole', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 24 }), (text) => {
        const ids = tokenizer.encode(text);
        const pieces = streamed(tokenizer, ids);
        expect(pieces.join('')).toBe(tokenizer.decode(ids));
        const decoded = tokenizer.decode(ids);
        if (!decoded.includes('\uFFFD'))
          for (const piece of pieces)
            expect(wellFormed(piece) && !piece.includes('\uFFFD')).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});
