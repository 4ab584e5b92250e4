import { KilnError, KilnErrorCode } from '../errors.js';
import { closestKey } from '../settings/setting-declaration.js';
import type { GenerationDefaults } from './generation-config.js';

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

/** The parameters Kiln's sampler and scheduler act on. */
const READ = [
  'max_new_tokens',
  'do_sample',
  'temperature',
  'top_k',
  'top_p',
  'repetition_penalty',
  'seed',
  'stop',
  'stop_sequences',
];

/**
 * Parameters of Hugging Face TGI and DJL LMI that Kiln does not implement, each with the
 * values that ask for nothing (what leaving it out means), so that clients sending their
 * defaults are still served; any other value is refused rather than ignored.
 */
const UNIMPLEMENTED = new Map<string, (value: unknown) => boolean>(
  Object.entries({
    // Kiln's answers always carry their details.
    details: (v) => typeof v === 'boolean',
    return_full_text: (v) => v === false,
    decoder_input_details: (v) => v === false,
    watermark: (v) => v === false,
    best_of: (v) => v === 1,
    num_beams: (v) => v === 1,
    typical_p: (v) => v === 1,
    truncate: () => false,
    top_n_tokens: (v) => v === 0,
    frequency_penalty: (v) => v === 0,
    presence_penalty: (v) => v === 0,
    length_penalty: (v) => v === 1,
    min_new_tokens: (v) => v === 0,
    no_repeat_ngram_size: (v) => v === 0,
    ignore_eos_token: (v) => v === false,
    logprobs: (v) => v === false,
    grammar: () => false,
    adapters: () => false,
  }),
);

/** Refuses a parameter Kiln would otherwise ignore, naming it (and the closest one it reads). */
function refuseIgnored(p: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(p)) {
    if (value === undefined || value === null || READ.includes(key)) continue;
    const asksNothing = UNIMPLEMENTED.get(key);
    if (asksNothing?.(value)) continue;
    if (asksNothing)
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `parameter ${key} is not supported by Kiln (leave it out, or send the value that asks for nothing)`,
      );
    const closest = closestKey(key, READ);
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `unknown parameter ${key}${closest ? ` (did you mean ${closest}?)` : ''}; Kiln reads ${READ.join(', ')}`,
    );
  }
}

/**
 * Reads generation parameters from a request's `parameters` object (snake_case:
 * `max_new_tokens`, `temperature`, `top_k`, `top_p`, `repetition_penalty`, `seed`, `stop`,
 * `do_sample`). Wrong types are refused with INVALID_INPUT naming the key, and so is any
 * other key unless its value asks for nothing: a parameter is never silently ignored.
 * Ranges are checked where the sampler is made. What the request leaves out comes from
 * `defaults` (the model's `generation_config.json`), as Hugging Face's `generate` reads them.
 */
export function parseGenerationParameters(
  raw: unknown,
  defaults: GenerationDefaults = {},
): GenerationParameters {
  if (raw === undefined || raw === null) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new KilnError(KilnErrorCode.InvalidInput, 'parameters must be a JSON object');
  const p = raw as Record<string, unknown>;
  refuseIgnored(p);
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
  const doSample = p.do_sample ?? defaults.doSample ?? false;
  if (typeof doSample !== 'boolean')
    throw new KilnError(KilnErrorCode.InvalidInput, 'do_sample must be true or false');
  const optional = <K extends string, V>(key: K, value: V | undefined) =>
    (value === undefined ? {} : { [key]: value }) as Partial<Record<K, V>>;
  return {
    maxNewTokens,
    doSample,
    stop: stops as string[],
    ...optional('temperature', number('temperature') ?? defaults.temperature),
    ...optional('topK', number('top_k') ?? defaults.topK),
    ...optional('topP', number('top_p') ?? defaults.topP),
    ...optional('repetitionPenalty', number('repetition_penalty') ?? defaults.repetitionPenalty),
    ...optional('seed', number('seed')),
  };
}
