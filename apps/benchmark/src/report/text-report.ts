import type { HttpResult, InProcessResult, TuneResult, BenchResult } from '../results.js';
import { STAGES } from '../results.js';
import { configPropertiesText, servingPropertiesText } from '../tune/recommendation.js';
import { formatBytes, formatMs, formatRate, serverCells, textTable } from './format.js';

/** Styles for headings and warnings; identity functions when colour is off. */
export interface TextStyle {
  bold(text: string): string;
  dim(text: string): string;
  yellow(text: string): string;
}

const PLAIN: TextStyle = { bold: (t) => t, dim: (t) => t, yellow: (t) => t };

/** The report printed on screen at the end of a run. */
export function textReport(result: BenchResult, style: TextStyle = PLAIN): string {
  switch (result.kind) {
    case 'in-process':
      return inProcessReport(result, style);
    case 'http':
      return httpReport(result, style);
    case 'tune':
      return tuneReport(result, style);
  }
}

function inProcessReport(r: InProcessResult, style: TextStyle): string {
  const threads = r.threads === undefined ? '' : ` × ${r.threads} threads`;
  const lines = [
    style.bold(
      `kiln-bench · ${r.model} (${r.engine}) · ${r.workers} worker${r.workers === 1 ? '' : 's'}${threads} · batch ${r.batchSize} · concurrency ${r.concurrency} · inputs ${r.inputs}`,
    ),
    '',
    `  model load       ${formatMs(r.loadMs)} ms${r.workers === 1 ? '' : ` (${r.workers} workers in parallel)`}`,
    `  first inference  ${formatMs(r.firstInferenceMs)} ms`,
    `  throughput       ${formatRate(r.throughput)} req/s (${r.iterations} requests in ${(r.elapsedMs / 1000).toFixed(2)} s, ${r.errors} errors)`,
    '',
    textTable(
      ['latency (ms)', 'p50', 'p90', 'p99', 'mean', 'max'],
      STAGES.map((stage) => {
        const s = r.latency[stage];
        return [
          stage,
          formatMs(s.p50Ms),
          formatMs(s.p90Ms),
          formatMs(s.p99Ms),
          formatMs(s.meanMs),
          formatMs(s.maxMs),
        ];
      }),
      { indent: '  ' },
    ),
    '',
    `  memory RSS ${formatBytes(r.resources.rssPeakBytes)} peak, ${formatBytes(r.resources.rssEndBytes)} at the end · CPU ${r.resources.cpuPercent.toFixed(0)}% (of ${r.resources.cores * 100}% on ${r.resources.cores} cores)`,
  ];
  if (r.firstError) lines.push(style.yellow(`  first error: ${r.firstError}`));
  return lines.join('\n');
}

function httpReport(r: HttpResult, style: TextStyle): string {
  const withServer = r.levels.some((l) => l.server);
  const header = [
    r.mode === 'concurrency' ? 'concurrency' : 'rate /s',
    'req/s',
    'p50 ms',
    'p90 ms',
    'p99 ms',
    'errors',
    'stable',
  ];
  if (withServer) header.push('queue ms', 'pre ms', 'infer ms', 'post ms', 'batch');
  const rows = r.levels.map((l) => {
    const row = [
      String(l.level),
      formatRate(l.throughput),
      formatMs(l.latency.p50Ms),
      formatMs(l.latency.p90Ms),
      formatMs(l.latency.p99Ms),
      String(l.errors),
      l.stable ? 'yes' : `no (${l.windows})`,
    ];
    if (withServer) row.push(...serverCells(l.server));
    return row;
  });
  const lines = [
    style.bold(
      `kiln-bench · ${r.server} · model ${r.model} · ${r.protocol} · inputs ${r.inputs} · ${r.mode} sweep`,
    ),
    '',
    textTable(header, rows, { indent: '  ', leftColumns: [] }),
  ];
  if (withServer)
    lines.push(
      '',
      style.dim(
        '  queue/pre/infer/post: server-side means from its metrics; batch: mean jobs per execution',
      ),
    );
  const unstable = r.levels.filter((l) => !l.stable).length;
  if (unstable > 0)
    lines.push(
      style.yellow(
        `  ${unstable} level(s) did not settle within 10% over 3 windows: try a longer --window`,
      ),
    );
  const failed = r.levels.find((l) => l.firstError);
  if (failed) lines.push(style.yellow(`  first error: ${failed.firstError}`));
  return lines.join('\n');
}

function tuneReport(r: TuneResult, style: TextStyle): string {
  const rows = r.candidates.map((c) => {
    const best = c.best;
    const shown = best ?? c.levels[0];
    return [
      `${c === r.recommended ? '*' : ''}${c.batchSize}`,
      String(c.maxBatchDelayMs),
      `${c.workers}×${c.threads}`,
      shown ? (c.load === 'rate' ? `${shown.level}/s` : `${shown.level} clients`) : '-',
      shown ? formatRate(shown.throughput) : '-',
      shown ? formatMs(shown.latency.p50Ms) : '-',
      shown ? formatMs(shown.latency.p99Ms) : '-',
      [c.setting, best ? '' : 'over budget'].filter(Boolean).join('; '),
    ];
  });
  const budget =
    r.latencyBudgetMs === undefined ? 'highest throughput' : `P99 within ${r.latencyBudgetMs} ms`;
  return [
    style.bold(`kiln-bench --tune · ${r.model} (${r.engine}) · inputs ${r.inputs} · ${budget}`),
    '',
    textTable(
      ['batch', 'delay ms', 'workers×threads', 'load', 'req/s', 'p50 ms', 'p99 ms', 'note'],
      rows,
      { indent: '  ' },
    ),
    style.dim('  * recommended. Rows with clients: best level within the budget (closed loop);'),
    style.dim(
      '  rows with /s: half the best throughput offered at a fixed rate, to compare batch delays.',
    ),
    '',
    style.bold('recommended serving.properties'),
    servingPropertiesText(r).trimEnd(),
    ...(configPropertiesText(r)
      ? ['', style.bold('recommended config.properties'), configPropertiesText(r).trimEnd()]
      : []),
  ].join('\n');
}
