import type { GenerationTokenizer } from '@kiln/batching';
import type { TokenizerThread } from './tokenizer-thread.js';

/**
 * A generative model's tokenizer threads: prompts are encoded on one and generated tokens
 * decoded on the other, so that a long prompt being encoded never holds the text of the
 * generations already running.
 */
export interface ModelTokenizers {
  readonly prompts: TokenizerThread;
  readonly outputs: TokenizerThread;
}

/**
 * One generation's view of a model's tokenizer, for `generateText`, which decodes each
 * generated token on its own, in order: each goes through a TokenTextStream on the output
 * thread, so a byte-level BPE token that holds part of a UTF-8 character gives '' until the
 * character is whole, and a token's text depends on the tokens before it as in the whole
 * decoded answer. Make one per generation and `end` it when the generation is over; a
 * character that is still split when generation ends (at max_new_tokens) is left out.
 */
export function streamingTokenizer(
  tokenizers: ModelTokenizers,
): GenerationTokenizer & { end(): void } {
  const stream = tokenizers.outputs.stream();
  return {
    eosTokenId: tokenizers.prompts.eosTokenId,
    encode: (text) => tokenizers.prompts.encode(text),
    decode: async (tokens) => (await Promise.all(tokens.map((t) => stream.push(t)))).join(''),
    end: () => stream.end(),
  };
}
