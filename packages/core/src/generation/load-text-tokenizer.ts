import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';
import {
  BpeTokenizer,
  GPT2_MERGES_FILE,
  GPT2_VOCAB_FILE,
  TOKENIZER_JSON_FILE,
} from './bpe-tokenizer.js';
import { CHAR_VOCAB_FILE, CharTokenizer, type TextTokenizer } from './text-tokenizer.js';

/**
 * The tokenizer a model folder carries, chosen by its files:
 * - `tokenizer.json` (Hugging Face): a {@link BpeTokenizer} over it;
 * - `vocab.json` as an object with `merges.txt` (GPT-2's files): a byte-level BPE tokenizer;
 * - `vocab.json` as an array: a {@link CharTokenizer}.
 * A BPE model's end-of-sequence token is `config.json`'s `eos_token_id` when it names one, else
 * `tokenizer_config.json`'s `eos_token`, else `<|endoftext|>`. A character vocabulary ends at
 * its `<|endoftext|>` entry only.
 */
export async function loadTextTokenizer(dir: string): Promise<TextTokenizer> {
  const has = (file: string) =>
    access(join(dir, file)).then(
      () => true,
      () => false,
    );
  if ((await has(TOKENIZER_JSON_FILE)) || (await has(GPT2_MERGES_FILE))) {
    const eosTokenId = await configEosTokenId(dir);
    return BpeTokenizer.fromFolder(dir, eosTokenId === undefined ? {} : { eosTokenId });
  }
  if (await has(CHAR_VOCAB_FILE)) return CharTokenizer.fromFolder(dir);
  throw new KilnError(
    KilnErrorCode.ModelLoadFailed,
    `the model folder has no tokenizer: ${TOKENIZER_JSON_FILE}, GPT-2's ${GPT2_VOCAB_FILE} + ${GPT2_MERGES_FILE}, or a character ${CHAR_VOCAB_FILE}`,
  );
}

async function configEosTokenId(dir: string): Promise<number | undefined> {
  let config: unknown;
  try {
    config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
  } catch {
    return undefined;
  }
  const id = (config as { eos_token_id?: unknown } | null)?.eos_token_id;
  if (Number.isInteger(id)) return id as number;
  // Some configs list several; the first is the one a sequence ends with.
  if (Array.isArray(id) && Number.isInteger(id[0])) return id[0] as number;
  return undefined;
}
