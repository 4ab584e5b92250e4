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

/** Parses serving.properties text (Java properties syntax). */
export function parseServingProperties(text: string): ServingProperties {
  let raw: Record<string, string>;
  try {
    raw = parse(text) as Record<string, string>;
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, 'serving.properties is malformed');
  }
  return servingPropertiesFrom(raw);
}

/** Builds typed properties from key/value pairs (file contents merged with overrides). */
export function servingPropertiesFrom(raw: Readonly<Record<string, string>>): ServingProperties {
  const options: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (key.startsWith('option.')) options[key.slice('option.'.length)] = value;
  }
  return {
    raw: { ...raw },
    engine: raw.engine,
    translatorFactory: raw.translatorFactory,
    loadOnDevices: raw.load_on_devices,
    jobQueueSize: int(raw, 'job_queue_size', SERVING_DEFAULTS.jobQueueSize, 1),
    batchSize: int(raw, 'batch_size', SERVING_DEFAULTS.batchSize, 1),
    maxBatchDelayMs: int(raw, 'max_batch_delay', SERVING_DEFAULTS.maxBatchDelayMs, 0),
    maxIdleTimeS: int(raw, 'max_idle_time', SERVING_DEFAULTS.maxIdleTimeS, 0),
    minWorkers: optionalInt(raw, 'minWorkers', 0),
    maxWorkers: optionalInt(raw, 'maxWorkers', 0),
    options,
  };
}

function optionalInt(raw: Readonly<Record<string, string>>, key: string, min: number): number | undefined {
  return raw[key] === undefined ? undefined : int(raw, key, 0, min);
}

function int(raw: Readonly<Record<string, string>>, key: string, fallback: number, min: number): number {
  const text = raw[key];
  if (text === undefined || text.trim() === '') return fallback;
  const value = Number(text.trim());
  if (!Number.isInteger(value) || value < min) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `serving.properties ${key}=${text} must be an integer ≥ ${min}`,
    );
  }
  return value;
}
