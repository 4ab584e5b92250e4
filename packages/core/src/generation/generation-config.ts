import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';

/** Hugging Face's generation defaults beside a model. */
export const GENERATION_CONFIG_FILE = 'generation_config.json';

/**
 * What a model's `generation_config.json` asks of a request that does not say otherwise, in
 * Kiln's terms. Only what the file names is here.
 */
export interface GenerationDefaults {
  readonly maxNewTokens?: number;
  readonly doSample?: boolean;
  readonly temperature?: number;
  readonly topK?: number;
  readonly topP?: number;
  readonly repetitionPenalty?: number;
  /** Every token that ends a sequence (`eos_token_id`, one id or a list). */
  readonly eosTokenIds?: readonly number[];
}

/**
 * Reads a model folder's `generation_config.json`; none is no defaults. A value of the wrong
 * type is refused naming it, rather than silently changing how the model generates.
 */
export async function readGenerationDefaults(dir: string): Promise<GenerationDefaults> {
  let text: string;
  try {
    text = await readFile(join(dir, GENERATION_CONFIG_FILE), 'utf8');
  } catch {
    return {};
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${GENERATION_CONFIG_FILE} is not valid JSON`,
      {
        cause: error,
      },
    );
  }
  return generationDefaults(json);
}

/** The defaults a parsed `generation_config.json` holds. */
export function generationDefaults(json: unknown): GenerationDefaults {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new KilnError(KilnErrorCode.InvalidConfig, `${GENERATION_CONFIG_FILE} must be an object`);
  const config = json as Record<string, unknown>;
  const bad = (key: string, rule: string) =>
    new KilnError(KilnErrorCode.InvalidConfig, `${GENERATION_CONFIG_FILE}: ${key} must be ${rule}`);
  const number = (key: string, valid: (n: number) => boolean, rule: string) => {
    const value = config[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'number' || !valid(value)) throw bad(key, rule);
    return value;
  };
  const doSample = config.do_sample;
  if (doSample !== undefined && doSample !== null && typeof doSample !== 'boolean')
    throw bad('do_sample', 'true or false');
  const defaults: Record<string, unknown> = {
    maxNewTokens: number('max_new_tokens', (n) => Number.isInteger(n) && n >= 1, 'an integer >= 1'),
    doSample: doSample ?? undefined,
    temperature: number('temperature', (n) => n >= 0, 'a number >= 0'),
    // Hugging Face's top_k 0 keeps every token, as Kiln's does.
    topK: number('top_k', (n) => Number.isInteger(n) && n >= 0, 'an integer >= 0'),
    topP: number('top_p', (n) => n > 0 && n <= 1, 'a number in (0, 1]'),
    repetitionPenalty: number('repetition_penalty', (n) => n > 0, 'a number > 0'),
    eosTokenIds: eosTokenIds(config.eos_token_id, GENERATION_CONFIG_FILE),
  };
  // A temperature of 0 asks for greedy decoding, as vLLM reads it.
  if (defaults.temperature === 0) {
    defaults.temperature = undefined;
    defaults.doSample = false;
  }
  return Object.fromEntries(
    Object.entries(defaults).filter(([, v]) => v !== undefined),
  ) as GenerationDefaults;
}

/** `eos_token_id` as a list of ids: one id, a list of them, or nothing. */
export function eosTokenIds(value: unknown, file: string): number[] | undefined {
  if (value === undefined || value === null) return undefined;
  const ids = Array.isArray(value) ? (value as unknown[]) : [value];
  if (!ids.every((id) => Number.isInteger(id) && (id as number) >= 0))
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${file}: eos_token_id must be a token id or a list of them`,
    );
  return ids as number[];
}
