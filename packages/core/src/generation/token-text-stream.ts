import type { TextTokenizer } from './text-tokenizer.js';

/** The character a decoder gives for bytes that are not (yet) a whole UTF-8 character. */
const REPLACEMENT = '\uFFFD';

/**
 * Turns generated tokens into text one token at a time. A byte-level BPE token may hold only
 * part of a UTF-8 character (an emoji is often two or three tokens), and some decoders
 * change a token's text by what comes before it (a leading space); so each token is decoded
 * together with the tokens before it, and text is held back while it ends in an incomplete
 * character. What `push` answers, joined, is the decoded text of all tokens (as Hugging Face's
 * and vLLM's incremental detokenizers do it). A token that never completes a character is let
 * through, as U+FFFD, after `maxHeldTokens` more.
 */
export class TokenTextStream {
  private readonly tokens: number[] = [];
  /** Tokens before `prefix` are done; [prefix, read) is context already shown. */
  private prefix = 0;
  private read = 0;

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
    if (
      !force &&
      held <= this.maxHeldTokens &&
      (all.endsWith(REPLACEMENT) || all.length <= shown.length)
    )
      return '';
    this.prefix = this.read;
    this.read = this.tokens.length;
    return all.slice(shown.length);
  }
}
