import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GPT2_END_OF_TEXT, KilnErrorCode, loadTextTokenizer } from '@kiln/core';
import { TokenizerThread } from './tokenizer-thread.js';

/** GPT-2's byte → printable character table (bytes_to_unicode). */
function byteChars(): string[] {
  const printable = (b: number) =>
    (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const chars: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) chars.push(String.fromCodePoint(printable(b) ? b : 256 + extra++));
  return chars;
}

/** GPT-2's files for a byte-level vocabulary: multi-byte characters are several tokens. */
async function writeGpt2Files(dir: string): Promise<void> {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, b) => (vocab[c] = b));
  vocab[GPT2_END_OF_TEXT] = 256;
  await writeFile(join(dir, 'vocab.json'), JSON.stringify(vocab));
  await writeFile(join(dir, 'merges.txt'), '#version: 0.2\n');
}

const TEXT = 'héllo, café — 世界 🎉🎉 ok';

let dir: string;
let thread: TokenizerThread;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kiln-tokenizer-thread-'));
  await writeGpt2Files(dir);
  thread = await TokenizerThread.start(dir);
});

afterAll(async () => {
  await thread?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('TokenizerThread', () => {
  it('encodes as the tokenizer does on this thread', async () => {
    const here = await loadTextTokenizer(dir);
    expect(thread.vocabSize).toBe(here.vocabSize);
    expect(thread.eosTokenId).toBe(256);
    expect(await thread.encode(TEXT)).toEqual(here.encode(TEXT));
  });

  it('answers errors of the tokenizer, and of a folder without one, as KilnErrors', async () => {
    const chars = await mkdtemp(join(tmpdir(), 'kiln-tokenizer-thread-chars-'));
    try {
      await writeFile(join(chars, 'vocab.json'), JSON.stringify(['a', 'b']));
      const charThread = await TokenizerThread.start(chars);
      await expect(charThread.encode('abc')).rejects.toMatchObject({
        code: KilnErrorCode.InvalidInput,
        message: expect.stringMatching(/"c" is not in the model's vocabulary/),
      });
      expect(await charThread.encode('ab')).toEqual([0, 1]);
      await charThread.close();
      await expect(charThread.encode('ab')).rejects.toMatchObject({ code: KilnErrorCode.Closed });
      await rm(join(chars, 'vocab.json'));
      await expect(TokenizerThread.start(chars)).rejects.toMatchObject({
        code: KilnErrorCode.ModelLoadFailed,
      });
    } finally {
      await rm(chars, { recursive: true, force: true });
    }
  });
});
