import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GPT2_END_OF_TEXT, KilnErrorCode, gpt2TokenizerJson, loadTextTokenizer } from '@kiln/core';
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

/** A byte-level vocabulary: the 256 byte tokens, then `<|endoftext|>`. */
function byteVocab(): Record<string, number> {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, b) => (vocab[c] = b));
  vocab[GPT2_END_OF_TEXT] = 256;
  return vocab;
}

/** GPT-2's files for a byte-level vocabulary: multi-byte characters are several tokens. */
async function writeGpt2Files(dir: string): Promise<void> {
  await writeFile(join(dir, 'vocab.json'), JSON.stringify(byteVocab()));
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

  it("renders chats with the folder's template and tells its generation defaults", async () => {
    const chat = await mkdtemp(join(tmpdir(), 'kiln-tokenizer-thread-chat-'));
    try {
      await writeGpt2Files(chat);
      await writeFile(
        join(chat, 'tokenizer_config.json'),
        JSON.stringify({
          eos_token: GPT2_END_OF_TEXT,
          chat_template:
            '{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}{% endfor %}{% if tools %}tools: {{ tools | length }}{% endif %}{% if add_generation_prompt %}assistant:{% endif %}',
        }),
      );
      await writeFile(
        join(chat, 'generation_config.json'),
        JSON.stringify({ eos_token_id: [256, 10], temperature: 0.7, max_new_tokens: 12 }),
      );
      const chatThread = await TokenizerThread.start(chat);
      try {
        expect(chatThread.eosTokenIds).toEqual([256, 10]);
        expect(chatThread.generationDefaults).toEqual({
          eosTokenIds: [256, 10],
          temperature: 0.7,
          maxNewTokens: 12,
        });
        expect(chatThread.chatTemplate).toEqual({ eosToken: GPT2_END_OF_TEXT, usesTools: true });
        const here = await loadTextTokenizer(chat);
        const tokens = await chatThread.encodeChat([{ role: 'user', content: '世界 🎉' }], [{}]);
        const rendered = `user: 世界 🎉${GPT2_END_OF_TEXT}tools: 1assistant:`;
        expect(tokens).toEqual(here.encode(rendered, { addSpecialTokens: false }));
        // The eos text is the special token, not its characters.
        expect(tokens.filter((t) => t === 256)).toHaveLength(1);
      } finally {
        await chatThread.close();
      }
      await expect(thread.encodeChat([{ role: 'user', content: 'x' }])).rejects.toMatchObject({
        code: KilnErrorCode.InvalidInput,
        message: expect.stringMatching(/no chat template/),
      });
    } finally {
      await rm(chat, { recursive: true, force: true });
    }
  });

  it("adds none of the tokenizer's own special tokens to a chat: its template writes them", async () => {
    const chat = await mkdtemp(join(tmpdir(), 'kiln-tokenizer-thread-bos-'));
    try {
      // A tokenizer that starts every text with a beginning-of-sequence token, as Llama's does.
      const withBos = {
        ...gpt2TokenizerJson(byteVocab(), ''),
        post_processor: {
          type: 'TemplateProcessing',
          single: [
            { SpecialToken: { id: GPT2_END_OF_TEXT, type_id: 0 } },
            { Sequence: { id: 'A', type_id: 0 } },
          ],
          pair: [
            { SpecialToken: { id: GPT2_END_OF_TEXT, type_id: 0 } },
            { Sequence: { id: 'A', type_id: 0 } },
            { Sequence: { id: 'B', type_id: 1 } },
          ],
          special_tokens: {
            [GPT2_END_OF_TEXT]: { id: GPT2_END_OF_TEXT, ids: [256], tokens: [GPT2_END_OF_TEXT] },
          },
        },
      };
      await writeFile(join(chat, 'tokenizer.json'), JSON.stringify(withBos));
      await writeFile(
        join(chat, 'tokenizer_config.json'),
        JSON.stringify({
          bos_token: GPT2_END_OF_TEXT,
          chat_template: '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}',
        }),
      );
      const bosThread = await TokenizerThread.start(chat);
      try {
        expect(await bosThread.encode('ab')).toEqual([256, 97, 98]);
        expect(await bosThread.encodeChat([{ role: 'user', content: 'ab' }])).toEqual([
          256, 97, 98,
        ]);
        expect(bosThread.chatTemplate).toEqual({ bosToken: GPT2_END_OF_TEXT, usesTools: false });
      } finally {
        await bosThread.close();
      }
    } finally {
      await rm(chat, { recursive: true, force: true });
    }
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
