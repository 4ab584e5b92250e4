import { type GenerationParameters, StopText } from '@kiln/core';
import type { FinishReason } from './generation-job.js';
import type { GenerationResult, RollingScheduler } from './rolling-scheduler.js';

/**
 * What text generation needs of a tokenizer (a @kiln/core TextTokenizer is one). Either call
 * may answer later: a server tokenizes on a thread of its own, so that a long prompt never
 * holds its event loop.
 */
export interface GenerationTokenizer {
  readonly eosTokenId: number | undefined;
  encode(text: string): readonly number[] | Promise<readonly number[]>;
  /** Called with one generated token at a time, in order. */
  decode(tokens: readonly number[]): string | Promise<string>;
}

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
  tokenizer: GenerationTokenizer,
  prompt: string,
  parameters: GenerationParameters,
  options: TextGenerationOptions = {},
): Promise<TextGenerationResult> {
  const stopText = new StopText(parameters.stop);
  const show = (text: string, token: number) => {
    const shown = stopText.push(text);
    if (shown) options.onText?.(shown, token);
  };
  const result = await scheduler.generate({
    promptTokens: await tokenizer.encode(prompt),
    maxNewTokens: parameters.maxNewTokens,
    sampling: parameters,
    ...(tokenizer.eosTokenId === undefined ? {} : { eosTokenId: tokenizer.eosTokenId }),
    ...(options.signal ? { signal: options.signal } : {}),
    isStop: () => stopText.stopped,
    onToken: (token) => {
      const text = tokenizer.decode([token]);
      if (typeof text === 'string') return show(text, token);
      return text.then((later) => show(later, token));
    },
  });
  if (!stopText.stopped) {
    const rest = stopText.flush();
    if (rest) options.onText?.(rest, result.tokens[result.tokens.length - 1] ?? -1);
  }
  return { ...result, text: stopText.all };
}
