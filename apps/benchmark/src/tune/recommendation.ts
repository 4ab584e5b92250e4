import { SERVING_SETTINGS } from '@kiln/core';
import { CONFIG_DEFAULTS } from '@kiln/server';
import type { LoadMode, TuneCandidate, TuneResult } from '../results.js';

/** What the steps after batching found, for the keys they decide. */
export interface TunedExtras {
  /** The batchifier keys that won under variable lengths (a model with a dynamic axis). */
  sequences?: Readonly<Record<string, string>>;
  /** Whether pinned workers won (measured where Kiln declares cpu_pinning, on Linux). */
  pinned?: boolean;
  /** The malloc a Python-mode model's worker processes ran faster with. */
  allocator?: 'jemalloc' | 'default';
}

/** The engine option that sets intra-op threads, by engine (the pool knows these keys). */
const THREAD_OPTION: Readonly<Record<string, string>> = {
  onnxruntime: 'intraOpNumThreads',
  pytorch: 'num_threads',
};

/**
 * serving.properties keys for a tuned configuration, in the order they are printed. Keys other
 * than Kiln's pool settings are written only where this Kiln declares them: warm-up at the
 * batch sizes the model will see, the batchifier that won under variable lengths, pinning,
 * and a Python-mode model's allocator.
 */
export function recommendedProperties(
  candidate: TuneCandidate,
  engine: string,
  extras: TunedExtras = {},
): Record<string, string> {
  const properties: Record<string, string> = {
    batch_size: String(candidate.batchSize),
    max_batch_delay: String(candidate.maxBatchDelayMs),
    minWorkers: String(candidate.workers),
    maxWorkers: String(candidate.workers),
    [`option.${THREAD_OPTION[engine.toLowerCase()] ?? 'intraOpNumThreads'}`]: String(
      candidate.threads,
    ),
  };
  if (declaredKey('warmup_batch_sizes'))
    properties.warmup_batch_sizes = [...new Set([1, candidate.batchSize])].join(',');
  Object.assign(properties, extras.sequences);
  if (extras.pinned !== undefined && declaredKey('cpu_pinning'))
    properties.cpu_pinning = String(extras.pinned);
  if (extras.allocator) properties['option.allocator'] = extras.allocator;
  return properties;
}

/**
 * config.properties keys (server-wide, for every model the server runs): TorchServe's launcher
 * switch, as the pinning step found, where this Kiln's server declares it.
 */
export function recommendedConfigProperties(extras: TunedExtras): Record<string, string> {
  const config: Record<string, string> = {};
  if (extras.pinned !== undefined && 'cpu_launcher_enable' in CONFIG_DEFAULTS)
    config.cpu_launcher_enable = String(extras.pinned);
  return config;
}

/** Whether this Kiln declares a serving.properties key (other work adds keys as it lands). */
export function declaredKey(key: string): boolean {
  return SERVING_SETTINGS.some((d) => d.key === key && d.unsupported === undefined);
}

/** The recommendation as a serving.properties file, its evidence in comments. */
export function servingPropertiesText(result: TuneResult): string {
  const best = result.recommended?.best;
  if (!result.recommended || !best) {
    return `# no configuration kept P99 within ${result.latencyBudgetMs} ms; try a larger budget or a smaller input\n`;
  }
  const budget =
    result.latencyBudgetMs === undefined
      ? 'no latency budget'
      : `P99 budget ${result.latencyBudgetMs} ms`;
  return [
    `# kiln-bench --tune for ${result.model} (${result.engine}), inputs ${result.inputs}, ${budget}`,
    `# measured ${best.throughput.toFixed(1)} req/s ${loadText(result.recommended.load, best.level)}, P50 ${best.latency.p50Ms.toFixed(2)} ms, P99 ${best.latency.p99Ms.toFixed(2)} ms`,
    ...Object.entries(result.properties).map(([key, value]) => `${key}=${value}`),
    '',
  ].join('\n');
}

/** The server-wide lines as a config.properties file, or '' when there are none. */
export function configPropertiesText(result: TuneResult): string {
  const lines = Object.entries(result.configProperties ?? {});
  if (lines.length === 0) return '';
  return [
    `# kiln-bench --tune for ${result.model}: server-wide keys (config.properties, every model)`,
    ...lines.map(([key, value]) => `${key}=${value}`),
    '',
  ].join('\n');
}

/** `at concurrency 8`, or `with 800 req/s offered`. */
export function loadText(load: LoadMode, level: number): string {
  return load === 'rate' ? `with ${level} req/s offered` : `at concurrency ${level}`;
}
