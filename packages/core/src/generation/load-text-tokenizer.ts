import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';
import {
  BpeTokenizer,
  GPT2_MERGES_FILE,
  GPT2_VOCAB_FILE,
  TOKENIZER_JSON_FILE,
} from './bpe-tokenizer.js';
import { eosTokenIds, readGenerationDefaults } from './generation-config.js';
import { CHAR_VOCAB_FILE, CharTokenizer, type TextTokenizer } from './text-tokenizer.js';

/**
 * The tokenizer a model folder carries, chosen by its files:
 * - `tokenizer.json` (Hugging Face): a {@link BpeTokenizer} over it;
 * - `vocab.json` as an object with `merges.txt` (GPT-2's files): a byte-level BPE tokenizer;
 * - `vocab.json` as an array: a {@link CharTokenizer}.
 * A BPE model's end-of-sequence token is `config.json`'s `eos_token_id` when it names one, else
 * `tokenizer_config.json`'s `eos_token`, else `<|endoftext|>`; every id of `config.json`'s
 * `eos_token_id` ends a sequence too. A character vocabulary ends at its `<|endoftext|>` entry.
 * Either also ends at every id of `generation_config.json`'s `eos_token_id` (one or a list,
 * as Hugging Face's `generate` reads it).
 */
export async function loadTextTokenizer(dir: string): Promise<TextTokenizer> {
  const has = (file: string) =>
    access(join(dir, file)).then(
      () => true,
      () => false,
    );
  const configIds = await configEosTokenIds(dir);
  const generationIds = (await readGenerationDefaults(dir)).eosTokenIds ?? [];
  if ((await has(TOKENIZER_JSON_FILE)) || (await has(GPT2_MERGES_FILE))) {
    const eosTokenId = configIds[0] ?? generationIds[0];
    return BpeTokenizer.fromFolder(dir, {
      ...(eosTokenId === undefined ? {} : { eosTokenId }),
      eosTokenIds: [...configIds, ...generationIds],
    });
  }
  if (await has(CHAR_VOCAB_FILE)) return CharTokenizer.fromFolder(dir, generationIds);
  throw new KilnError(
    KilnErrorCode.ModelLoadFailed,
    `the model folder has no tokenizer: ${TOKENIZER_JSON_FILE}, GPT-2's ${GPT2_VOCAB_FILE} + ${GPT2_MERGES_FILE}, or a character ${CHAR_VOCAB_FILE}`,
  );
}

/** config.json's `eos_token_id`s; some configs list several, the first is the main one. */
async function configEosTokenIds(dir: string): Promise<number[]> {
  let config: unknown;
  try {
    config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
  } catch {
    return [];
  }
  const id = (config as { eos_token_id?: unknown } | null)?.eos_token_id;
  try {
    return eosTokenIds(id, 'config.json') ?? [];
  } catch {
    // config.json describes the model for many tools; an odd entry here is not Kiln's to refuse.
    return [];
  }
}
