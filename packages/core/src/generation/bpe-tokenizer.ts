import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type * as HfTokenizers from '@huggingface/tokenizers';
import type { Tokenizer } from '@huggingface/tokenizers';
import { KilnError, KilnErrorCode } from '../errors.js';
import { lazyModule } from '../lazy-module.js';
import type { GrammarVocabulary } from './response-format.js';
import type { EncodeOptions, TextTokenizer } from './text-tokenizer.js';

// Loaded with the first BPE tokenizer, not when core is imported (core loads in every thread).
const hfTokenizers = lazyModule<typeof HfTokenizers>('@huggingface/tokenizers');

/** Hugging Face's tokenizer file: the whole pipeline (normalizer, pre-tokenizer, model, decoder). */
export const TOKENIZER_JSON_FILE = 'tokenizer.json';
/** Hugging Face's tokenizer settings beside it (special tokens, clean-up), when present. */
export const TOKENIZER_CONFIG_FILE = 'tokenizer_config.json';
/** GPT-2's original pair: `vocab.json` (token text → id) and `merges.txt` (one merge a line). */
export const GPT2_VOCAB_FILE = 'vocab.json';
export const GPT2_MERGES_FILE = 'merges.txt';
/** GPT-2's end-of-text token. */
export const GPT2_END_OF_TEXT = '<|endoftext|>';

export interface BpeTokenizerOptions {
  /** Overrides the end-of-sequence token (e.g. config.json's `eos_token_id`). */
  readonly eosTokenId?: number;
  /** Every token that ends a sequence (generation_config.json's `eos_token_id` list). */
  readonly eosTokenIds?: readonly number[];
}

/**
 * A Hugging Face tokenizer: whatever `tokenizer.json` describes that @huggingface/tokenizers
 * reads — byte-level BPE as GPT-2's, SentencePiece-style BPE with byte fallback and Metaspace
 * as Llama's, Unigram as T5's. Encoding adds the tokenizer's special tokens
 * as Hugging Face does by default; decoding skips them and leaves spaces as they are, so that
 * `decode(encode(text))` is `text` for a byte-level tokenizer.
 */
export class BpeTokenizer implements TextTokenizer {
  readonly vocabSize: number;
  readonly eosTokenId: number | undefined;
  readonly eosTokenIds: readonly number[];

  // Private, so that the published types never name @huggingface/tokenizers' own (whose
  // declarations do not check under `moduleResolution: nodenext` without skipLibCheck).
  private constructor(
    private readonly tokenizer: Tokenizer,
    /** The parsed tokenizer.json, for grammarVocabulary. */
    private readonly json: Record<string, unknown>,
    options: BpeTokenizerOptions & { eosToken?: string } = {},
  ) {
    let size = 0;
    for (const id of tokenizer.get_vocab(true).values()) size = Math.max(size, id + 1);
    this.vocabSize = size;
    this.eosTokenId =
      options.eosTokenId ??
      options.eosTokenIds?.[0] ??
      tokenizer.token_to_id(options.eosToken ?? GPT2_END_OF_TEXT);
    const ids = new Set(options.eosTokenIds ?? []);
    if (this.eosTokenId !== undefined) ids.add(this.eosTokenId);
    this.eosTokenIds = [...ids];
  }

  /** A tokenizer from the parsed `tokenizer.json` and (optionally) `tokenizer_config.json`. */
  static fromJson(
    tokenizerJson: unknown,
    tokenizerConfig: Record<string, unknown> = {},
    options: BpeTokenizerOptions = {},
  ): BpeTokenizer {
    let tokenizer: Tokenizer;
    try {
      tokenizer = new (hfTokenizers().Tokenizer)(tokenizerJson as object, tokenizerConfig);
    } catch (error) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${TOKENIZER_JSON_FILE} is not a tokenizer this server reads: ${
          error instanceof Error ? error.message : String(error)
        }`,
        { cause: error },
      );
    }
    const eosToken = specialTokenText(tokenizerConfig.eos_token);
    return new BpeTokenizer(tokenizer, tokenizerJson as Record<string, unknown>, {
      ...options,
      ...(eosToken ? { eosToken } : {}),
    });
  }

  /** A GPT-2 byte-level BPE tokenizer from its `vocab.json` object and `merges.txt` text. */
  static fromGpt2Files(
    vocab: Record<string, number>,
    merges: string,
    options: BpeTokenizerOptions = {},
  ): BpeTokenizer {
    return BpeTokenizer.fromJson(gpt2TokenizerJson(vocab, merges), {}, options);
  }

  /**
   * Reads a model folder's `tokenizer.json` (with `tokenizer_config.json` when present), or
   * else GPT-2's `vocab.json` + `merges.txt`.
   */
  static async fromFolder(dir: string, options: BpeTokenizerOptions = {}): Promise<BpeTokenizer> {
    const json = await readJsonFile(join(dir, TOKENIZER_JSON_FILE));
    if (json !== undefined) {
      const config = await readJsonFile(join(dir, TOKENIZER_CONFIG_FILE));
      return BpeTokenizer.fromJson(json, isObject(config) ? config : {}, options);
    }
    const vocab = await readJsonFile(join(dir, GPT2_VOCAB_FILE));
    const merges = await readFile(join(dir, GPT2_MERGES_FILE), 'utf8').catch(() => undefined);
    if (!isObject(vocab) || merges === undefined)
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `the model folder has neither ${TOKENIZER_JSON_FILE} nor GPT-2's ${GPT2_VOCAB_FILE} (an object) and ${GPT2_MERGES_FILE}`,
      );
    if (!Object.values(vocab).every((id) => Number.isInteger(id) && (id as number) >= 0))
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${GPT2_VOCAB_FILE} must map token texts to integer ids`,
      );
    return BpeTokenizer.fromGpt2Files(vocab as Record<string, number>, merges, options);
  }

  encode(text: string, options: EncodeOptions = {}): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: options.addSpecialTokens ?? true })
      .ids;
  }

  /**
   * Each token as tokenizer.json spells it (special tokens as ''), and how: GPT-2's byte
   * alphabet under a ByteLevel decoder, else SentencePiece's ▁ and `<0xAB>` byte tokens.
   */
  grammarVocabulary(): GrammarVocabulary {
    const tokens: string[] = new Array<string>(this.vocabSize).fill('');
    for (const [text, id] of this.tokenizer.get_vocab(true)) tokens[id] = text;
    const special = this.json.added_tokens;
    if (Array.isArray(special))
      for (const added of special as { id?: unknown; special?: unknown }[])
        if (added.special === true && typeof added.id === 'number') tokens[added.id] = '';
    const spec = JSON.stringify([this.json.decoder, this.json.pre_tokenizer, this.json.normalizer]);
    const byteLevel = spec.includes('"ByteLevel"');
    return {
      tokens,
      encoding: byteLevel ? 'byte_level' : 'byte_fallback',
      prependSpace:
        !byteLevel &&
        (/"type":"Prepend","prepend":"▁"/.test(spec) ||
          /"type":"Metaspace"[^}]*"(?:add_prefix_space":true|prepend_scheme":"(?:first|always)")/.test(
            spec,
          )),
    };
  }

  decode(tokens: readonly number[]): string {
    if (tokens.length === 0) return '';
    return this.tokenizer.decode([...tokens], {
      skip_special_tokens: true,
      clean_up_tokenization_spaces: false,
    });
  }
}

/**
 * The `tokenizer.json` equivalent of GPT-2's `vocab.json` + `merges.txt`: byte-level
 * pre-tokenization (GPT-2's split pattern, no prefix space), BPE over the byte alphabet, and
 * `<|endoftext|>` as a special token when the vocabulary has it. `merges.txt` may start with a
 * `#version` line; blank lines are skipped.
 */
export function gpt2TokenizerJson(vocab: Record<string, number>, merges: string): object {
  const mergeLines = merges
    .split(/\r?\n/)
    .filter((line, i) => line.trim() !== '' && !(i === 0 && line.startsWith('#version')));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true };
  const eos = vocab[GPT2_END_OF_TEXT];
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens:
      eos === undefined
        ? []
        : [
            {
              id: eos,
              content: GPT2_END_OF_TEXT,
              single_word: false,
              lstrip: false,
              rstrip: false,
              normalized: true,
              special: true,
            },
          ],
    normalizer: null,
    pre_tokenizer: { ...byteLevel, use_regex: true },
    post_processor: { ...byteLevel, trim_offsets: false, use_regex: true },
    decoder: { ...byteLevel, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges: mergeLines,
    },
  };
}

function specialTokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (isObject(value) && typeof value.content === 'string') return value.content;
  return undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A JSON file's value; undefined when the file is absent. Unparseable JSON is refused. */
async function readJsonFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new KilnError(KilnErrorCode.InvalidConfig, `${file} is not valid JSON`, {
      cause: error,
    });
  }
}
