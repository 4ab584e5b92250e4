import { type TextTokenizer, TokenTextStream } from '@kiln/core';

/**
 * One generation's view of a tokenizer, for `generateText`, which decodes each generated
 * token on its own, in order: a one-token `decode` goes through a {@link TokenTextStream}, so a
 * byte-level BPE token that holds part of a UTF-8 character gives '' until the character is
 * whole, and a token's text depends on the tokens before it as in the whole decoded answer.
 * Anything else is the tokenizer's. Make one per generation; a character that is still split
 * when generation ends (at max_new_tokens) is left out.
 */
export function streamingTokenizer(tokenizer: TextTokenizer): TextTokenizer {
  const stream = new TokenTextStream(tokenizer);
  return {
    vocabSize: tokenizer.vocabSize,
    eosTokenId: tokenizer.eosTokenId,
    encode: (text) => tokenizer.encode(text),
    decode: (tokens) => (tokens.length === 1 ? stream.push(tokens[0]!) : tokenizer.decode(tokens)),
  };
}
