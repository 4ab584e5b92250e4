import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gpt2TokenizerJson } from '@kiln/core';

/** GPT-2's end-of-text token: the id after the 256 bytes. */
export const BYTE_BPE_END_OF_TEXT = '<|endoftext|>';
export const BYTE_BPE_END_OF_TEXT_ID = 256;

/**
 * GPT-2's byte → character table: printable Latin-1 bytes stand for themselves, the others
 * for characters from U+0100 on, so that every byte is one visible character.
 */
export function gpt2ByteCharacters(): string[] {
  const printable = (b: number) =>
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 256;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(printable(b) ? b : next++));
}

/**
 * A byte-level BPE `tokenizer.json` (GPT-2's kind) of `vocabSize` tokens: the 256 bytes (id =
 * byte value), `<|endoftext|>` (id 256), then merges of a space or a letter and a letter,
 * so that every id encodes and decodes. Needs at least 257 tokens.
 */
export function byteBpeTokenizerJson(vocabSize: number): object {
  if (vocabSize < 257) throw new Error('a byte-level BPE vocabulary needs at least 257 tokens');
  const chars = gpt2ByteCharacters();
  const vocab: Record<string, number> = {};
  chars.forEach((c, b) => (vocab[c] = b));
  vocab[BYTE_BPE_END_OF_TEXT] = 256;
  const byteChar = (c: string) => chars[c.charCodeAt(0)]!;
  const letters = [...'etaoinshrdlcumwfgypbvkjxqz'].map(byteChar);
  const merges: string[] = [];
  // GPT-2's pre-tokenizer keeps a space with the word after it, never the one before.
  for (const a of [byteChar(' '), ...letters]) {
    for (const b of letters) {
      if (256 + merges.length + 1 >= vocabSize) break;
      if (vocab[a + b] !== undefined) continue;
      merges.push(`${a} ${b}`);
      vocab[a + b] = 256 + merges.length;
    }
  }
  if (Object.keys(vocab).length !== vocabSize)
    throw new Error(
      `a byte-level BPE vocabulary here holds at most ${Object.keys(vocab).length} tokens`,
    );
  return gpt2TokenizerJson(vocab, merges.join('\n'));
}

/**
 * Writes a byte-level BPE `tokenizer.json` (byteBpeTokenizerJson's) and GPT-2's
 * `tokenizer_config.json` beside it (`<|endoftext|>` begins and ends text, none added).
 */
export async function writeByteBpeTokenizer(
  dir: string,
  json: object,
  maxLen: number,
): Promise<void> {
  await writeFile(join(dir, 'tokenizer.json'), `${JSON.stringify(json)}\n`);
  const config = {
    tokenizer_class: 'GPT2Tokenizer',
    bos_token: BYTE_BPE_END_OF_TEXT,
    eos_token: BYTE_BPE_END_OF_TEXT,
    add_bos_token: false,
    model_max_length: maxLen,
  };
  await writeFile(join(dir, 'tokenizer_config.json'), `${JSON.stringify(config, null, 2)}\n`);
}
