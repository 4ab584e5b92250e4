import type { LoadMode, TuneCandidate, TuneResult } from '../results.js';

/** The engine option that sets intra-op threads, by engine (the pool knows these keys). */
const THREAD_OPTION: Readonly<Record<string, string>> = {
  onnxruntime: 'intraOpNumThreads',
  pytorch: 'num_threads',
};

/** serving.properties keys for a tuned configuration, in the order they are printed. */
export function recommendedProperties(
  candidate: TuneCandidate,
  engine: string,
): Record<string, string> {
  return {
    batch_size: String(candidate.batchSize),
    max_batch_delay: String(candidate.maxBatchDelayMs),
    minWorkers: String(candidate.workers),
    maxWorkers: String(candidate.workers),
    [`option.${THREAD_OPTION[engine.toLowerCase()] ?? 'intraOpNumThreads'}`]: String(
      candidate.threads,
    ),
  };
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

/** `at concurrency 8`, or `with 800 req/s offered`. */
export function loadText(load: LoadMode, level: number): string {
  return load === 'rate' ? `with ${level} req/s offered` : `at concurrency ${level}`;
}
