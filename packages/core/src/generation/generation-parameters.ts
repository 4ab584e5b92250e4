import { KilnError, KilnErrorCode } from '../errors.js';

/** What a text-generation request asks for, in Hugging Face / DJL LMI terms. */
export interface GenerationParameters {
  readonly maxNewTokens: number;
  readonly doSample: boolean;
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly repetitionPenalty?: number;
  readonly seed?: number;
  readonly stop: readonly string[];
}

/** DJL LMI's default `max_new_tokens`. */
export const DEFAULT_MAX_NEW_TOKENS = 30;

/**
 * Reads generation parameters from a request's `parameters` object (snake_case:
 * `max_new_tokens`, `temperature`, `top_k`, `top_p`, `repetition_penalty`, `seed`, `stop`,
 * `do_sample`). Wrong types are refused with INVALID_INPUT naming the key; ranges are
 * checked where the sampler is made.
 */
export function parseGenerationParameters(
  raw: unknown,
  defaults: { maxNewTokens?: number } = {},
): GenerationParameters {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new KilnError(KilnErrorCode.InvalidInput, 'parameters must be a JSON object');
  const p = raw as Record<string, unknown>;
  const number = (key: string): number | undefined => {
    const value = p[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'number' || !Number.isFinite(value))
      throw new KilnError(KilnErrorCode.InvalidInput, `${key} must be a number`);
    return value;
  };
  const maxNewTokens = number('max_new_tokens') ?? defaults.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS;
  if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1)
    throw new KilnError(KilnErrorCode.InvalidInput, 'max_new_tokens must be an integer >= 1');
  const stop = p.stop ?? p.stop_sequences ?? [];
  const stops = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(stops) || !stops.every((s) => typeof s === 'string' && s.length > 0))
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      'stop must be a string or an array of non-empty strings',
    );
  const doSample = p.do_sample ?? false;
  if (typeof doSample !== 'boolean')
    throw new KilnError(KilnErrorCode.InvalidInput, 'do_sample must be true or false');
  const optional = <K extends string, V>(key: K, value: V | undefined) =>
    (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;
  return {
    maxNewTokens,
    doSample,
    stop: stops as string[],
    ...optional('temperature', number('temperature')),
    ...optional('topK', number('top_k')),
    ...optional('topP', number('top_p')),
    ...optional('repetitionPenalty', number('repetition_penalty')),
    ...optional('seed', number('seed')),
  };
}
