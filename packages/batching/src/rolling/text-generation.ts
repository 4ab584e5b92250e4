import { type GenerationParameters, StopText, type TextTokenizer } from '@kiln/core';
import type { FinishReason, GenerationResult, RollingScheduler } from './rolling-scheduler.js';

export interface TextGenerationOptions {
  /** Aborting (e.g. the client went away) frees the sequence's slot at the next step. */
  readonly signal?: AbortSignal;
  /** Each piece of text as soon as it may be shown (stop strings are held back). */
  readonly onText?: (text: string, token: number) => void;
}

export interface TextGenerationResult extends Omit<GenerationResult, 'tokens'> {
  /** The generated text, without the prompt and without a stop string. */
  readonly text: string;
  readonly tokens: readonly number[];
  readonly finishReason: FinishReason;
}

/**
 * Text in, text out through a rolling scheduler: encodes the prompt, ends at the
 * tokenizer's end-of-sequence token or at a stop string, and streams text pieces.
 */
export async function generateText(
  scheduler: RollingScheduler<unknown>,
  tokenizer: TextTokenizer,
  prompt: string,
  parameters: GenerationParameters,
  options: TextGenerationOptions = {},
): Promise<TextGenerationResult> {
  const stopText = new StopText(parameters.stop);
  const result = await scheduler.generate({
    promptTokens: tokenizer.encode(prompt),
    maxNewTokens: parameters.maxNewTokens,
    sampling: parameters,
    ...(tokenizer.eosTokenId === undefined ? {} : { eosTokenId: tokenizer.eosTokenId }),
    ...(options.signal ? { signal: options.signal } : {}),
    isStop: () => stopText.stopped,
    onToken: (token) => {
      const shown = stopText.push(tokenizer.decode([token]));
      if (shown) options.onText?.(shown, token);
    },
  });
  if (!stopText.stopped) {
    const rest = stopText.flush();
    if (rest) options.onText?.(rest, result.tokens[result.tokens.length - 1] ?? -1);
  }
  return { ...result, text: stopText.all };
}
