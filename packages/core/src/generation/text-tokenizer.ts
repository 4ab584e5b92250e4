import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { GrammarVocabulary } from './response-format.js';

/** Turns text into token ids and back, for text generation. */
export interface TextTokenizer {
  readonly vocabSize: number;
  /** The token that ends a sequence, when the vocabulary has one. */
  readonly eosTokenId: number | undefined;
  /**
   * Every token that ends a sequence (generation_config.json may list several, e.g. an
   * end-of-turn token beside end-of-text); `eosTokenId` alone when absent.
   */
  readonly eosTokenIds?: readonly number[];
  /**
   * Token ids of `text`; with `addSpecialTokens: false`, without the tokens the tokenizer
   * adds around a text (a chat template writes its own).
   */
  encode(text: string, options?: EncodeOptions): number[];
  decode(tokens: readonly number[]): string;
  /** The vocabulary as a grammar engine reads it (response_format), when the tokenizer can tell. */
  grammarVocabulary?(): GrammarVocabulary;
}

export interface EncodeOptions {
  /** Add the tokenizer's special tokens (e.g. a beginning-of-sequence token); default true. */
  readonly addSpecialTokens?: boolean;
}

/** The file a character vocabulary lives in beside the model: a JSON array, id → text. */
export const CHAR_VOCAB_FILE = 'vocab.json';
const END_OF_TEXT = '<|endoftext|>';

/**
 * A character-level tokenizer: each entry of the vocabulary is one character, except an
 * optional `<|endoftext|>` entry that ends a sequence. Text with a character outside the
 * vocabulary is refused with INVALID_INPUT naming it.
 */
export class CharTokenizer implements TextTokenizer {
  readonly vocabSize: number;
  readonly eosTokenId: number | undefined;
  readonly eosTokenIds: readonly number[];
  private readonly ids = new Map<string, number>();

  /** `moreEosTokenIds` end a sequence besides the `<|endoftext|>` entry (generation_config). */
  constructor(
    private readonly vocab: readonly string[],
    moreEosTokenIds: readonly number[] = [],
  ) {
    this.vocabSize = vocab.length;
    const eos = vocab.indexOf(END_OF_TEXT);
    this.eosTokenId = eos >= 0 ? eos : moreEosTokenIds[0];
    this.eosTokenIds = [...new Set([...(eos >= 0 ? [eos] : []), ...moreEosTokenIds])];
    vocab.forEach((text, id) => {
      if (id !== eos && [...text].length !== 1)
        throw new KilnError(
          KilnErrorCode.InvalidConfig,
          `character vocabulary entry ${id} is ${JSON.stringify(text)}, not one character`,
        );
      if (!this.ids.has(text)) this.ids.set(text, id);
    });
  }

  /** Reads `vocab.json` from a model folder. */
  static async fromFolder(
    dir: string,
    moreEosTokenIds: readonly number[] = [],
  ): Promise<CharTokenizer> {
    let vocab: unknown;
    try {
      vocab = JSON.parse(await readFile(join(dir, CHAR_VOCAB_FILE), 'utf8'));
    } catch (error) {
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `the model folder has no readable ${CHAR_VOCAB_FILE} (a JSON array of token texts)`,
        { cause: error },
      );
    }
    if (!Array.isArray(vocab) || !vocab.every((t) => typeof t === 'string'))
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${CHAR_VOCAB_FILE} must be an array of strings`,
      );
    return new CharTokenizer(vocab, moreEosTokenIds);
  }

  encode(text: string): number[] {
    return [...text].map((c) => {
      const id = this.ids.get(c);
      if (id === undefined)
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `the character ${JSON.stringify(c)} is not in the model's vocabulary`,
        );
      return id;
    });
  }

  decode(tokens: readonly number[]): string {
    return tokens.map((t) => (t === this.eosTokenId ? '' : (this.vocab[t] ?? ''))).join('');
  }

  /** Each character as itself; the end of text is special. */
  grammarVocabulary(): GrammarVocabulary {
    return {
      tokens: this.vocab.map((text, id) => (id === this.eosTokenId ? '' : text)),
      encoding: 'raw',
      prependSpace: false,
    };
  }
}
