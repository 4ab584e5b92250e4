import type { TextTokenizer } from './text-tokenizer.js';

/** The character a decoder gives for bytes that are not (yet) a whole UTF-8 character. */
const REPLACEMENT = '\uFFFD';

/**
 * Turns generated tokens into text one token at a time. A byte-level BPE token may hold only
 * part of a UTF-8 character (an emoji is often two or three tokens), a SentencePiece byte
 * fallback spells a character in one token per byte (`<0xE2><0x82><0xAC>` is €), and some
 * decoders change a token's text by what comes before it (a leading space, stripped at the
 * start); so each token is decoded together with the tokens before it, and text is held back
 * while it ends in an incomplete character or has not grown. What `push` answers, joined, is
 * the decoded text of all tokens (as Hugging Face's and vLLM's incremental detokenizers do
 * it). A character still incomplete after `maxHeldTokens` tokens in a row (UTF-8 needs at
 * most 4) is let through as U+FFFD.
 */
export class TokenTextStream {
  private readonly tokens: number[] = [];
  /** Tokens before `prefix` are done; [prefix, read) is context already shown. */
  private prefix = 0;
  private read = 0;
  /** Tokens in a row whose text so far ended in an incomplete character. */
  private splitTokens = 0;

  constructor(
    private readonly tokenizer: TextTokenizer,
    private readonly maxHeldTokens = 4,
  ) {}

  /** Adds the next token; answers the text it completes (often '' while a character is split). */
  push(token: number): string {
    this.tokens.push(token);
    return this.take(false);
  }

  /** The text still held back at the end of generation (U+FFFD for a split character). */
  flush(): string {
    return this.take(true);
  }

  private take(force: boolean): string {
    if (this.read === this.tokens.length) return '';
    const shown = this.tokenizer.decode(this.tokens.slice(this.prefix, this.read));
    const all = this.tokenizer.decode(this.tokens.slice(this.prefix));
    const held = this.tokens.length - this.read;
    const split = all.endsWith(REPLACEMENT);
    this.splitTokens = split ? this.splitTokens + 1 : 0;
    const wait = split
      ? this.splitTokens <= this.maxHeldTokens
      : all.length <= shown.length && held <= this.maxHeldTokens;
    if (!force && wait) return '';
    this.splitTokens = 0;
    this.prefix = this.read;
    this.read = this.tokens.length;
    return all.slice(shown.length);
  }
}
