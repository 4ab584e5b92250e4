import { KilnError, KilnErrorCode } from '../errors.js';
import { OptionReader } from '../loading/option-reader.js';
import type { ServingProperties } from '../loading/serving-properties.js';
import { SERVING_OPTION_SETTINGS } from '../loading/serving-settings.js';
import type { EngineProvider, WorkerKind } from './engine.js';

/** DJL LMI's `option.rolling_batch` values that turn Kiln's rolling-batch scheduler on. */
const ROLLING_BATCH_ON: ReadonlySet<string> = new Set(['auto', 'scheduler']);

/** Rolling-batch settings (`option.*` keys declared in SERVING_OPTION_SETTINGS). */
export interface RollingBatchSettings {
  /** `option.max_rolling_batch_size`: sequences a step worker decodes at once. */
  readonly maxBatchSize: number | undefined;
  /** `option.max_rolling_batch_prefill_tokens`: prompt tokens fed per step. */
  readonly maxPrefillTokens: number | undefined;
  /** `option.max_kv_cache_bytes`: a step worker's key/value cache budget. */
  readonly maxKvCacheBytes: number | undefined;
  /** `option.rolling_batch_admission`: the order waiting requests are admitted in. */
  readonly admission: RollingAdmission | undefined;
}

/** Orders a step worker admits waiting requests in (see admissionRank in `@kiln/batching`). */
export const ROLLING_ADMISSIONS = ['first_come', 'longest_first'] as const;
export type RollingAdmission = (typeof ROLLING_ADMISSIONS)[number];

/** True when serving.properties asks for text generation with rolling batching. */
export function wantsRollingBatch(properties: ServingProperties): boolean {
  return ROLLING_BATCH_ON.has(properties.options.rolling_batch?.trim().toLowerCase() ?? '');
}

/**
 * What a model's workers run: `step` when serving.properties turns rolling batching on,
 * otherwise the engine's own kind (`serve` for an engine that serves requests, like Python
 * mode; `forward` for tensor engines). Throws INVALID_CONFIG when rolling batching is asked of
 * an engine whose workers cannot step.
 */
export function workerKindFor(
  provider: Pick<EngineProvider, 'name' | 'workerKinds'>,
  properties: ServingProperties,
): WorkerKind {
  const kinds = provider.workerKinds ?? ['forward'];
  if (wantsRollingBatch(properties)) {
    if (kinds.includes('step')) return 'step';
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `option.rolling_batch needs an engine whose workers decode step by step (OnnxRuntime), not ${provider.name}`,
    );
  }
  return kinds.includes('forward') ? 'forward' : kinds[0]!;
}

/** The rolling-batch keys of serving.properties, read as their declarations say. */
export function rollingBatchSettings(properties: ServingProperties): RollingBatchSettings {
  const o = new OptionReader(properties.options, SERVING_OPTION_SETTINGS);
  const MAX = Number.MAX_SAFE_INTEGER;
  return {
    maxBatchSize: o.integer('max_rolling_batch_size', { min: 1 }),
    maxPrefillTokens: o.integer('max_rolling_batch_prefill_tokens', { min: 1, max: MAX }),
    maxKvCacheBytes: o.integer('max_kv_cache_bytes', { min: 1, max: MAX }),
    admission: o.oneOf('rolling_batch_admission', ROLLING_ADMISSIONS),
  };
}
