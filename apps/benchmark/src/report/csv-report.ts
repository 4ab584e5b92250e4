import type { BenchResult, LevelResult } from '../results.js';
import { STAGES } from '../results.js';
import type { LatencySummary } from '../stats/latency-histogram.js';

/**
 * A result as CSV for spreadsheets: one row for an in-process run, one per level for a
 * sweep, one per level of each configuration for a tuning run. Times are milliseconds.
 */
export function csvReport(result: BenchResult): string {
  switch (result.kind) {
    case 'in-process': {
      const r = result;
      const columns: Record<string, string | number> = {
        model: r.model,
        engine: r.engine,
        workers: r.workers,
        threads: r.threads ?? '',
        batch_size: r.batchSize,
        concurrency: r.concurrency,
        inputs: r.inputs,
        load_ms: r.loadMs,
        first_inference_ms: r.firstInferenceMs,
        iterations: r.iterations,
        errors: r.errors,
        throughput: r.throughput,
        rss_peak_bytes: r.resources.rssPeakBytes,
        cpu_percent: r.resources.cpuPercent,
      };
      for (const stage of STAGES) Object.assign(columns, latencyColumns(stage, r.latency[stage]));
      return csv([columns]);
    }
    case 'http':
      return csv(
        result.levels.map((l) => ({
          model: result.model,
          protocol: result.protocol,
          [result.mode]: l.level,
          ...levelColumns(l),
          server_queue_ms: l.server?.queue.meanMs ?? '',
          server_preprocess_ms: l.server?.preprocess.meanMs ?? '',
          server_inference_ms: l.server?.inference.meanMs ?? '',
          server_postprocess_ms: l.server?.postprocess.meanMs ?? '',
          server_batch_size: l.server?.meanBatchSize ?? '',
        })),
      );
    case 'tune':
      return csv(
        result.candidates.flatMap((c) =>
          c.levels.map((l) => ({
            batch_size: c.batchSize,
            max_batch_delay_ms: c.maxBatchDelayMs,
            workers: c.workers,
            threads: c.threads,
            load: c.load,
            level: l.level,
            ...levelColumns(l),
            within_budget:
              result.latencyBudgetMs === undefined || l.latency.p99Ms <= result.latencyBudgetMs
                ? 'yes'
                : 'no',
            recommended: c === result.recommended && l === c.best ? 'yes' : 'no',
          })),
        ),
      );
  }
}

function levelColumns(l: LevelResult): Record<string, string | number> {
  return {
    throughput: l.throughput,
    requests: l.requests,
    errors: l.errors,
    stable: l.stable ? 'yes' : 'no',
    ...latencyColumns('latency', l.latency),
  };
}

function latencyColumns(prefix: string, s: LatencySummary): Record<string, number> {
  return {
    [`${prefix}_p50_ms`]: s.p50Ms,
    [`${prefix}_p90_ms`]: s.p90Ms,
    [`${prefix}_p99_ms`]: s.p99Ms,
    [`${prefix}_mean_ms`]: s.meanMs,
    [`${prefix}_max_ms`]: s.maxMs,
  };
}

function csv(rows: readonly Record<string, string | number>[]): string {
  if (rows.length === 0) return '';
  const header = Object.keys(rows[0]!);
  const cell = (value: string | number | undefined) => {
    const text = typeof value === 'number' ? String(Number(value.toFixed(6))) : (value ?? '');
    return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  return (
    [header.join(','), ...rows.map((row) => header.map((key) => cell(row[key])).join(','))].join(
      '\n',
    ) + '\n'
  );
}
