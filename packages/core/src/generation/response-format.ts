/**
 * What shape a generation's text must take (OpenAI's `response_format`): any JSON object, or
 * JSON valid against a schema. The sampler enforces it token by token (see ResponseGrammars),
 * so the text always parses when the generation ends at its end token.
 */
export type ResponseFormat =
  | { readonly type: 'json_object' }
  | {
      readonly type: 'json_schema';
      /** The JSON schema, as JSON text (it crosses threads as it came). */
      readonly schema: string;
    };

/**
 * A tokenizer's vocabulary as a grammar engine reads it: each token's text as the tokenizer
 * file spells it, and how that spelling maps to bytes.
 */
export interface GrammarVocabulary {
  /** By id; '' for special tokens, which never stand for text. */
  readonly tokens: readonly string[];
  /**
   * `byte_level`: GPT-2's byte alphabet (Ġ for a space); `byte_fallback`: SentencePiece's ▁
   * for a space and `<0xAB>` byte tokens; `raw`: the text itself.
   */
  readonly encoding: 'raw' | 'byte_fallback' | 'byte_level';
  /** Whether the tokenizer puts a space (▁) before the text it encodes. */
  readonly prependSpace: boolean;
}

/** Whether token `token` is allowed by a token bitmask (bit t % 32 of word t >> 5, XGrammar's). */
export function maskAllows(mask: Int32Array, token: number): boolean {
  return ((mask[token >> 5]! >>> (token & 31)) & 1) === 1;
}
