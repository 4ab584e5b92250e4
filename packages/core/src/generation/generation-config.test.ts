import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { generationDefaults, readGenerationDefaults } from './generation-config.js';
import { parseGenerationParameters } from './generation-parameters.js';
import { loadTextTokenizer } from './load-text-tokenizer.js';
import { llamaStyleBpeJson } from './test-support/tokenizer-json.js';

async function folder(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-generation-config-'));
  for (const [name, content] of Object.entries(files))
    await writeFile(join(dir, name), JSON.stringify(content));
  return dir;
}

describe('generation_config.json', () => {
  it("reads Hugging Face's defaults in Kiln's terms, eos_token_id as a list", () => {
    expect(
      generationDefaults({
        bos_token_id: 1,
        eos_token_id: [2, 32007],
        do_sample: true,
        temperature: 0.6,
        top_p: 0.9,
        top_k: 20,
        repetition_penalty: 1.05,
        max_new_tokens: 64,
        transformers_version: '4.40.0',
      }),
    ).toEqual({
      eosTokenIds: [2, 32007],
      doSample: true,
      temperature: 0.6,
      topP: 0.9,
      topK: 20,
      repetitionPenalty: 1.05,
      maxNewTokens: 64,
    });
    expect(generationDefaults({ eos_token_id: 50256 })).toEqual({ eosTokenIds: [50256] });
    // Temperature 0 asks for greedy decoding.
    expect(generationDefaults({ temperature: 0 })).toEqual({ doSample: false });
  });

  it('refuses a value of the wrong type, naming it', () => {
    for (const [config, key] of [
      [{ eos_token_id: 'x' }, 'eos_token_id'],
      [{ top_p: 2 }, 'top_p'],
      [{ do_sample: 'yes' }, 'do_sample'],
      [{ max_new_tokens: 0 }, 'max_new_tokens'],
    ] as const)
      expect(() => generationDefaults(config)).toThrow(
        expect.objectContaining({
          code: KilnErrorCode.InvalidConfig,
          message: expect.stringContaining(key),
        }),
      );
  });

  it('applies the defaults a request leaves out; what it sets wins', () => {
    const defaults = generationDefaults({
      do_sample: true,
      temperature: 0.6,
      top_k: 20,
      max_new_tokens: 64,
    });
    expect(parseGenerationParameters({}, defaults)).toEqual({
      maxNewTokens: 64,
      doSample: true,
      temperature: 0.6,
      topK: 20,
      stop: [],
    });
    expect(
      parseGenerationParameters(
        { max_new_tokens: 5, do_sample: false, temperature: 1.2, top_k: 0 },
        defaults,
      ),
    ).toEqual({ maxNewTokens: 5, doSample: false, temperature: 1.2, topK: 0, stop: [] });
    expect(parseGenerationParameters({})).toMatchObject({ maxNewTokens: 30, doSample: false });
  });

  it("ends a model's sequences at every eos_token_id it lists, beside the tokenizer's", async () => {
    const dir = await folder({
      'tokenizer.json': llamaStyleBpeJson(),
      'tokenizer_config.json': { eos_token: '</s>' },
      'generation_config.json': { eos_token_id: [2, 40] },
    });
    try {
      expect(await readGenerationDefaults(dir)).toEqual({ eosTokenIds: [2, 40] });
      const tokenizer = await loadTextTokenizer(dir);
      expect(tokenizer.eosTokenId).toBe(2);
      expect(tokenizer.eosTokenIds).toEqual([2, 40]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('adds listed end tokens to a character vocabulary too; none without the file', async () => {
    const dir = await folder({ 'vocab.json': ['a', 'b', '.'] });
    try {
      expect(await readGenerationDefaults(dir)).toEqual({});
      expect((await loadTextTokenizer(dir)).eosTokenIds).toEqual([]);
      await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: 2 }));
      const tokenizer = await loadTextTokenizer(dir);
      expect([tokenizer.eosTokenId, tokenizer.eosTokenIds]).toEqual([2, [2]]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
