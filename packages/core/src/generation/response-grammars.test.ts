import { describe, expect, it } from 'vitest';
import { KilnError } from '../errors.js';
import { BpeTokenizer } from './bpe-tokenizer.js';
import type { ResponseFormat } from './response-format.js';
import { maskAllows } from './response-format.js';
import { ResponseGrammars, checkResponseFormat } from './response-grammars.js';
import { llamaStyleBpeJson, metaspaceBpeJson } from './test-support/tokenizer-json.js';
import { CharTokenizer, type TextTokenizer } from './text-tokenizer.js';

/** GPT-2's byte → printable character table, and a few merges JSON uses. */
function byteLevelTokenizer(): BpeTokenizer {
  const printable = (b: number) =>
    (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const chars: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) chars.push(String.fromCodePoint(printable(b) ? b : 256 + extra++));
  const vocab: Record<string, number> = {};
  chars.forEach((c, b) => (vocab[c] = b));
  const merges = [
    ['{', '"'],
    ['"', ':'],
    ['"', ','],
    ['t', 'r'],
    ['tr', 'u'],
    ['tru', 'e'],
  ];
  for (const [a, b] of merges) vocab[a! + b!] = Object.keys(vocab).length;
  vocab['<|endoftext|>'] = Object.keys(vocab).length;
  return BpeTokenizer.fromGpt2Files(vocab, merges.map((m) => m.join(' ')).join('\n'));
}

const TOKENIZERS: Record<string, () => TextTokenizer> = {
  'byte-level BPE': byteLevelTokenizer,
  'SentencePiece-style BPE (Llama 2 layout)': () =>
    BpeTokenizer.fromJson(llamaStyleBpeJson(), { eos_token: '</s>' }),
  'SentencePiece-style BPE (Metaspace)': () =>
    BpeTokenizer.fromJson(metaspaceBpeJson(), { eos_token: '</s>' }),
  'character vocabulary': () =>
    new CharTokenizer(['<|endoftext|>', ...' {}[]":,.-0123456789abcdefghijklmnopqrstuvwxyz']),
};

const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 6 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pet: { enum: ['cat', 'dog'] },
    tags: { type: 'array', items: { type: 'boolean' }, maxItems: 3 },
  },
  required: ['name', 'age', 'pet', 'tags'],
};

/** A seeded walk through the tokens a constraint allows, until it ends at an end token. */
async function walk(
  tokenizer: TextTokenizer,
  format: ResponseFormat,
  seed: number,
): Promise<{ text: string; ended: boolean }> {
  const ends = tokenizer.eosTokenIds ?? [tokenizer.eosTokenId!];
  const grammars = new ResponseGrammars(tokenizer.grammarVocabulary!(), tokenizer.vocabSize, ends);
  const constraint = await grammars.constraint(format);
  let state = seed;
  const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const tokens: number[] = [];
  try {
    for (let i = 0; i < 400; i++) {
      const mask = await constraint.allowed();
      if (!mask) return { text: tokenizer.decode(tokens), ended: true };
      const allowed: number[] = [];
      for (let t = 0; t < tokenizer.vocabSize; t++) if (maskAllows(mask, t)) allowed.push(t);
      expect(allowed.length).toBeGreaterThan(0);
      // End as soon as the grammar allows it, and lean towards closing what is open, so that
      // the walk is short.
      const end = allowed.find((t) => ends.includes(t));
      const closing = allowed.filter((t) => /^["}\]0-9]/.test(tokenizer.decode([t])));
      const from = closing.length > 0 && random() < 0.7 ? closing : allowed;
      const token = end ?? from[Math.floor(random() * from.length)]!;
      expect(constraint.accept(token)).toBe(true);
      if (end === undefined) tokens.push(token);
    }
    return { text: tokenizer.decode(tokens), ended: false };
  } finally {
    constraint.dispose();
  }
}

describe.each(Object.entries(TOKENIZERS))('ResponseGrammars over a %s', (_, make) => {
  const tokenizer = make();

  it('allows only tokens that keep the text JSON valid against the schema', async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const { text, ended } = await walk(
        tokenizer,
        { type: 'json_schema', schema: JSON.stringify(SCHEMA) },
        seed,
      );
      expect(ended).toBe(true);
      const value = JSON.parse(text) as Record<string, unknown>;
      expect(Object.keys(value).sort()).toEqual(['age', 'name', 'pet', 'tags']);
      expect(typeof value.name).toBe('string');
      // JSON Schema counts characters (code points), not UTF-16 units.
      expect([...(value.name as string)].length, JSON.stringify(value.name)).toBeLessThanOrEqual(6);
      expect(Number.isInteger(value.age)).toBe(true);
      expect(['cat', 'dog']).toContain(value.pet);
      expect((value.tags as unknown[]).every((t) => typeof t === 'boolean')).toBe(true);
    }
  });

  it('json_object answers an object', async () => {
    const { text, ended } = await walk(tokenizer, { type: 'json_object' }, 3);
    expect(ended).toBe(true);
    const value: unknown = JSON.parse(text);
    expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
  });

  it('refuses a token the grammar does not allow, and keeps its place', async () => {
    const grammars = new ResponseGrammars(
      tokenizer.grammarVocabulary!(),
      tokenizer.vocabSize,
      tokenizer.eosTokenIds ?? [],
    );
    const constraint = await grammars.constraint({ type: 'json_object' });
    const [close] = tokenizer.encode('}', { addSpecialTokens: false }).slice(-1);
    expect(constraint.accept(close!)).toBe(false);
    const mask = (await constraint.allowed())!;
    expect(maskAllows(mask, close!)).toBe(false);
    constraint.dispose();
  });
});

describe('bad schemas', () => {
  const tokenizer = TOKENIZERS['character vocabulary']!();
  const grammars = new ResponseGrammars(tokenizer.grammarVocabulary!(), tokenizer.vocabSize, [0]);
  const bad = [
    ['{"type":5}', 'Type should be a string'],
    ['{"$ref":"#/nowhere"}', 'nowhere'],
    ['{"type":"string","pattern":"[a-"}', 'Regex'],
    ['not json', 'Failed to parse JSON'],
  ];

  it.each(bad)('%s is INVALID_INPUT with the reason, no source path', async (schema, reason) => {
    for (const attempt of [
      checkResponseFormat({ type: 'json_schema', schema }),
      grammars.constraint({ type: 'json_schema', schema }),
    ]) {
      const error = await attempt.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(KilnError.is(error, 'INVALID_INPUT')).toBe(true);
      const message = (error as KilnError).message;
      expect(message).toContain(reason);
      expect(message).not.toMatch(/\.cc|\/Users|\/home/);
      expect((error as KilnError).details).toEqual({ param: 'response_format' });
    }
    // A good schema compiles after a bad one (on a fresh XGrammar instance).
    const { text } = await walk(
      tokenizer,
      { type: 'json_schema', schema: JSON.stringify(SCHEMA) },
      9,
    );
    expect(JSON.parse(text)).toHaveProperty('pet');
  });
});
