import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { parse } from 'dot-properties';
import { KilnError, KilnErrorCode } from '../errors.js';

/** DJL Serving's per-model settings, with its defaults. */
export interface ServingProperties {
  /** Every key as written (after Java properties unescaping). */
  readonly raw: Readonly<Record<string, string>>;
  readonly engine: string | undefined;
  readonly translatorFactory: string | undefined;
  /** `load_on_devices`: `*`, or device names separated by `;`. */
  readonly loadOnDevices: string | undefined;
  readonly jobQueueSize: number;
  readonly batchSize: number;
  /** `max_batch_delay`, milliseconds. */
  readonly maxBatchDelayMs: number;
  /** `max_idle_time`, seconds. */
  readonly maxIdleTimeS: number;
  readonly minWorkers: number | undefined;
  readonly maxWorkers: number | undefined;
  /** `option.*` keys with the prefix removed: handed to the engine. */
  readonly options: Readonly<Record<string, string>>;
}

export const SERVING_DEFAULTS = {
  jobQueueSize: 1000,
  batchSize: 1,
  maxBatchDelayMs: 100,
  maxIdleTimeS: 60,
} as const;

export const SERVING_PROPERTIES_FILE = 'serving.properties';

/** Larger files are refused: settings never need this much, and reading must stay bounded. */
export const MAX_SERVING_PROPERTIES_BYTES = 1024 * 1024;

/** Parses serving.properties text (Java properties syntax). */
export function parseServingProperties(text: string): ServingProperties {
  let raw: Record<string, string>;
  try {
    // A byte-order mark would otherwise become part of the first key.
    raw = parse(text.replace(/^\uFEFF/, '')) as Record<string, string>;
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, 'serving.properties is malformed');
  }
  return servingPropertiesFrom(raw);
}

/**
 * Reads `serving.properties` from a model folder; a folder without one gets the defaults.
 * Unreadable, oversized or invalid files are INVALID_CONFIG.
 */
export async function readServingProperties(dir: string): Promise<ServingProperties> {
  const file = path.join(dir, SERVING_PROPERTIES_FILE);
  let text: string;
  try {
    const info = await stat(file);
    if (!info.isFile()) throw new Error('it is not a regular file');
    if (info.size > MAX_SERVING_PROPERTIES_BYTES) {
      throw new Error(`it holds ${info.size} bytes (at most ${MAX_SERVING_PROPERTIES_BYTES})`);
    }
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return servingPropertiesFrom({});
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, `cannot read ${file}`);
  }
  return parseServingProperties(text);
}

/**
 * Lays key/value overrides over properties (serving.properties keys, e.g. `batch_size`,
 * `option.intraOpNumThreads`): later layers win, undefined values and layers are skipped.
 * The result is validated again, so a bad override is INVALID_CONFIG too.
 */
export function mergeServingProperties(
  base: ServingProperties,
  ...layers: readonly (Readonly<Record<string, string | undefined>> | undefined)[]
): ServingProperties {
  const overrides = layers.flatMap((layer) =>
    Object.entries(layer ?? {}).filter(
      (entry): entry is [string, string] => entry[1] !== undefined,
    ),
  );
  return servingPropertiesFrom(Object.fromEntries([...Object.entries(base.raw), ...overrides]));
}

/** Builds typed properties from key/value pairs (file contents merged with overrides). */
export function servingPropertiesFrom(raw: Readonly<Record<string, string>>): ServingProperties {
  // fromEntries defines own properties, so a key such as `option.__proto__` stays a plain key.
  const options: Record<string, string> = Object.fromEntries(
    Object.entries(raw)
      .filter(([key]) => key.startsWith('option.'))
      .map(([key, value]) => [key.slice('option.'.length), value]),
  );
  return {
    raw: { ...raw },
    engine: setting(raw, 'engine'),
    translatorFactory: setting(raw, 'translatorFactory'),
    loadOnDevices: setting(raw, 'load_on_devices'),
    jobQueueSize: int(raw, 'job_queue_size', SERVING_DEFAULTS.jobQueueSize, 1),
    batchSize: int(raw, 'batch_size', SERVING_DEFAULTS.batchSize, 1),
    maxBatchDelayMs: int(raw, 'max_batch_delay', SERVING_DEFAULTS.maxBatchDelayMs, 0),
    maxIdleTimeS: int(raw, 'max_idle_time', SERVING_DEFAULTS.maxIdleTimeS, 0),
    minWorkers: optionalInt(raw, 'minWorkers', 0),
    maxWorkers: optionalInt(raw, 'maxWorkers', 0),
    options,
  };
}

/** A name-like setting: surrounding blanks dropped (Java keeps trailing ones), blank = unset. */
function setting(raw: Readonly<Record<string, string>>, key: string): string | undefined {
  return own(raw, key)?.trim() || undefined;
}

function own(raw: Readonly<Record<string, string>>, key: string): string | undefined {
  return Object.hasOwn(raw, key) ? raw[key] : undefined;
}

function optionalInt(
  raw: Readonly<Record<string, string>>,
  key: string,
  min: number,
): number | undefined {
  return own(raw, key)?.trim() ? int(raw, key, 0, min) : undefined;
}

function int(
  raw: Readonly<Record<string, string>>,
  key: string,
  fallback: number,
  min: number,
): number {
  const text = own(raw, key)?.trim();
  if (text === undefined || text === '') return fallback;
  // Decimal digits only, as Java's Integer.parseInt reads them: no 1e3, 0x10 or 2.0.
  const value = /^\+?\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `serving.properties ${key}=${text} must be an integer ≥ ${min}`,
    );
  }
  return value;
}
