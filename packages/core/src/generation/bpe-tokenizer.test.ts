import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BpeTokenizer, GPT2_END_OF_TEXT, gpt2TokenizerJson } from './bpe-tokenizer.js';
import { loadTextTokenizer } from './load-text-tokenizer.js';
import { CharTokenizer } from './text-tokenizer.js';
import { TokenTextStream } from './token-text-stream.js';

/** GPT-2's byte → printable character table (bytes_to_unicode). */
function byteChars(): string[] {
  const printable = (b: number) =>
    (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const chars: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) chars.push(String.fromCodePoint(printable(b) ? b : 256 + extra++));
  return chars;
}

/**
 * A GPT-2-style vocabulary: the 256 byte tokens, then merges (some inside multi-byte UTF-8
 * characters: é, and part of 🎉), then `<|endoftext|>`.
 */
function gpt2Files(): { vocab: Record<string, number>; merges: string } {
  const bc = byteChars();
  const vocab: Record<string, number> = {};
  bc.forEach((c, b) => (vocab[c] = b));
  const enc = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => bc[b]).join('');
  const pairs: [string, string][] = [
    [enc(' '), 't'],
    ['h', 'e'],
    [enc(' t'), 'he'],
    ['i', 'n'],
    ...([[enc('é').slice(0, 1), enc('é').slice(1)]] as [string, string][]),
    [enc('🎉').slice(0, 1), enc('🎉').slice(1, 2)],
    ['a', 'n'],
    ['an', 'd'],
    [enc(' '), 'and'],
  ];
  const lines = ['#version: 0.2'];
  for (const [a, b] of pairs) {
    vocab[a + b] = Object.keys(vocab).length;
    lines.push(`${a} ${b}`);
  }
  vocab[GPT2_END_OF_TEXT] = Object.keys(vocab).length;
  return { vocab, merges: `${lines.join('\n')}\n` };
}

const SAMPLES = [
  'the and in the thin',
  'héllo, café — 世界 🎉🎉 ok',
  '  leading spaces,\ttabs\nand\n\nnewlines \n',
  "it's 1234 apples; we'll see!",
];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kiln-bpe-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('BpeTokenizer', () => {
  const { vocab, merges } = gpt2Files();
  const bpe = BpeTokenizer.fromGpt2Files(vocab, merges);
  const library = new Tokenizer(gpt2TokenizerJson(vocab, merges), {});

  it('encodes as the library does and decodes back to the same text', () => {
    for (const text of SAMPLES) {
      const ids = bpe.encode(text);
      expect(ids).toEqual(library.encode(text).ids);
      expect(bpe.decode(ids)).toBe(text);
    }
    expect(bpe.encode(' the and')).toEqual([vocab['Ġthe'], vocab['Ġand']]);
    expect(bpe.vocabSize).toBe(Object.keys(vocab).length);
    expect(bpe.eosTokenId).toBe(vocab[GPT2_END_OF_TEXT]);
  });

  it('round-trips any text, one token per byte at worst', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (text) => {
        const ids = bpe.encode(text);
        expect(ids.length).toBeLessThanOrEqual(Buffer.byteLength(text, 'utf8'));
        expect(bpe.decode(ids)).toBe(text.replace(/[\uD800-\uDFFF]/gu, '\uFFFD'));
      }),
      { numRuns: 300 },
    );
  });

  it('reads the end-of-text token as special: decoding leaves it out', () => {
    const eos = bpe.eosTokenId!;
    expect(bpe.decode([...bpe.encode('in'), eos])).toBe('in');
    expect(bpe.encode(`a${GPT2_END_OF_TEXT}`)).toEqual([vocab.a, eos]);
  });
});

describe('TokenTextStream', () => {
  const { vocab, merges } = gpt2Files();
  const bpe = BpeTokenizer.fromGpt2Files(vocab, merges);

  const pieces = (tokens: readonly number[]) => {
    const stream = new TokenTextStream(bpe);
    const out = tokens.map((t) => stream.push(t));
    out.push(stream.flush());
    return out;
  };

  it('never splits a UTF-8 character across pieces', () => {
    // '🎉' is three tokens (one merge, then two single bytes); '世' three single bytes.
    const text = 'a 🎉 世界 café\n🎉';
    const out = pieces(bpe.encode(text));
    expect(out.join('')).toBe(text);
    for (const piece of out) {
      expect(piece).not.toContain('\uFFFD');
      expect(piece).toBe(Buffer.from(piece, 'utf8').toString('utf8'));
    }
    expect(out.filter(Boolean).length).toBeGreaterThan(4);
  });

  it('streams any text as whole characters, joining to the decoded text', () => {
    fc.assert(
      // Text without U+FFFD of its own, so that any U+FFFD is a split character.
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 30 }).filter((t) => !t.includes('\uFFFD')),
        (text) => {
          const out = pieces(bpe.encode(text));
          expect(out.join('')).toBe(text);
          for (const piece of out) expect(piece).not.toContain('\uFFFD');
        },
      ),
      { numRuns: 300 },
    );
  });

  it('lets a byte that never completes a character through at the end', () => {
    const [first] = bpe.encode('🎉');
    expect(pieces([first!])).toEqual(['', '\uFFFD']);
  });
});

describe('loadTextTokenizer', () => {
  it("chooses by the folder's files: tokenizer.json, GPT-2's pair, or a character vocabulary", async () => {
    const { vocab, merges } = gpt2Files();
    const gpt2 = join(dir, 'gpt2');
    const hf = join(dir, 'hf');
    const chars = join(dir, 'chars');
    for (const d of [gpt2, hf, chars])
      await import('node:fs/promises').then((fs) => fs.mkdir(d, { recursive: true }));
    await writeFile(join(gpt2, 'vocab.json'), JSON.stringify(vocab));
    await writeFile(join(gpt2, 'merges.txt'), merges);
    await writeFile(join(gpt2, 'config.json'), JSON.stringify({ eos_token_id: 7 }));
    await writeFile(join(hf, 'tokenizer.json'), JSON.stringify(gpt2TokenizerJson(vocab, merges)));
    await writeFile(join(chars, 'vocab.json'), JSON.stringify(['<|endoftext|>', 'a', 'b']));

    const a = await loadTextTokenizer(gpt2);
    const b = await loadTextTokenizer(hf);
    expect(a).toBeInstanceOf(BpeTokenizer);
    expect(b).toBeInstanceOf(BpeTokenizer);
    for (const text of SAMPLES) expect(a.encode(text)).toEqual(b.encode(text));
    expect(a.eosTokenId).toBe(7); // config.json's eos_token_id
    expect(b.eosTokenId).toBe(vocab[GPT2_END_OF_TEXT]);
    const c = await loadTextTokenizer(chars);
    expect(c).toBeInstanceOf(CharTokenizer);
    expect(c.encode('ab')).toEqual([1, 2]);
    await expect(loadTextTokenizer(dir)).rejects.toThrow(/has no tokenizer/);
  });
});
