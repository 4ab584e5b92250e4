import type {
  BenchResult,
  HttpResult,
  InProcessResult,
  LevelResult,
  TuneResult,
} from '../results.js';
import { STAGES } from '../results.js';
import { servingPropertiesText } from '../tune/recommendation.js';
import { formatBytes, formatMs, formatRate, serverCells } from './format.js';
import { barChart, esc, lineChart } from './svg-charts.js';

/**
 * A single HTML page with the results, tables and inline SVG charts. It loads nothing from
 * anywhere (no script, font or stylesheet), so it opens offline and can be attached as is.
 */
export function htmlReport(result: BenchResult, createdAt = new Date()): string {
  const { title, body } = content(result);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; color: #111827; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 0.5rem 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #e5e7eb; padding: 0.3rem 0.7rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
.charts svg { max-width: 100%; height: auto; border: 1px solid #e5e7eb; }
.meta { color: #6b7280; font-size: 0.9rem; }
pre { background: #f3f4f6; padding: 0.8rem; }
</style>
</head>
<body>
<h1>${esc(title)}</h1>
<p class="meta">kiln-bench report, ${esc(createdAt.toISOString())}</p>
${body}
<script type="application/json" id="kiln-bench-result">${JSON.stringify(result).replace(/</g, '\\u003c')}</script>
</body>
</html>
`;
}

function content(result: BenchResult): { title: string; body: string } {
  switch (result.kind) {
    case 'in-process':
      return inProcess(result);
    case 'http':
      return http(result);
    case 'tune':
      return tune(result);
  }
}

function inProcess(r: InProcessResult): { title: string; body: string } {
  const summary = table(
    ['measure', 'value'],
    [
      ['model', `${r.model} (${r.engine})`],
      ['inputs', r.inputs],
      ['workers × threads', `${r.workers} × ${r.threads ?? 'budgeted'}`],
      ['batch size, concurrency', `${r.batchSize}, ${r.concurrency}`],
      ['model load', `${formatMs(r.loadMs)} ms`],
      ['first inference', `${formatMs(r.firstInferenceMs)} ms`],
      ['throughput', `${formatRate(r.throughput)} req/s`],
      ['requests, errors', `${r.iterations}, ${r.errors}`],
      ['RSS peak', formatBytes(r.resources.rssPeakBytes)],
      ['CPU', `${r.resources.cpuPercent.toFixed(0)}% on ${r.resources.cores} cores`],
    ],
  );
  const latency = table(
    ['stage', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms', 'max ms'],
    STAGES.map((s) => {
      const l = r.latency[s];
      return [
        s,
        formatMs(l.p50Ms),
        formatMs(l.p90Ms),
        formatMs(l.p99Ms),
        formatMs(l.meanMs),
        formatMs(l.maxMs),
      ];
    }),
  );
  const chart = barChart({
    title: 'Latency by stage',
    valueLabel: 'milliseconds',
    categories: [...STAGES],
    series: (['p50', 'p90', 'p99'] as const).map((p) => ({
      name: p,
      values: STAGES.map((s) => r.latency[s][`${p}Ms`]),
    })),
  });
  return {
    title: `${r.model}: ${formatRate(r.throughput)} req/s in process`,
    body: `<h2>Summary</h2>${summary}<h2>Latency</h2>${latency}<div class="charts">${chart}</div>`,
  };
}

function http(r: HttpResult): { title: string; body: string } {
  const axis = r.mode === 'concurrency' ? 'concurrency' : 'request rate (req/s)';
  // The server's split, as the text report shows it, when its metrics were read.
  const withServer = r.levels.some((l) => l.server);
  const header = [axis, 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'errors', 'stable'];
  if (withServer)
    header.push('server queue ms', 'server pre ms', 'server infer ms', 'server post ms', 'batch');
  const rows = r.levels.map((l) => {
    const row = [
      String(l.level),
      formatRate(l.throughput),
      formatMs(l.latency.p50Ms),
      formatMs(l.latency.p90Ms),
      formatMs(l.latency.p99Ms),
      String(l.errors),
      l.stable ? 'yes' : 'no',
    ];
    if (withServer) row.push(...serverCells(l.server));
    return row;
  });
  const note = withServer
    ? '<p class="meta">server queue/pre/infer/post: means from its metrics (pre and post are the translator\'s processing); batch: mean jobs per execution</p>'
    : '';
  const charts = levelCharts(r.levels, axis, r.mode === 'concurrency');
  return {
    title: `${r.model} on ${r.server}: ${r.mode} sweep`,
    body:
      `<p>protocol ${esc(r.protocol)}, inputs ${esc(r.inputs)}, ${r.windowMs} ms windows, each level until 3 windows agree within 10%</p>` +
      table(header, rows) +
      note +
      `<div class="charts">${charts}</div>`,
  };
}

function tune(r: TuneResult): { title: string; body: string } {
  const rows = r.candidates.map((c) => {
    const shown = c.best ?? c.levels[0];
    return [
      `${c === r.recommended ? '★ ' : ''}${c.batchSize}`,
      String(c.maxBatchDelayMs),
      `${c.workers} × ${c.threads}`,
      shown ? (c.load === 'rate' ? `${shown.level} req/s offered` : `${shown.level} clients`) : '-',
      shown ? formatRate(shown.throughput) : '-',
      shown ? formatMs(shown.latency.p99Ms) : '-',
      c.best ? '' : 'over budget',
    ];
  });
  const scatter = lineChart({
    title: 'Configurations: throughput against P99 latency',
    xLabel: 'P99 latency (ms, log scale)',
    yLabel: 'requests per second',
    logX: true,
    width: 900,
    height: 420,
    series: r.candidates.map((c) => ({
      name: `b${c.batchSize} d${c.maxBatchDelayMs} ${c.workers}×${c.threads}${c.load === 'rate' ? ' (rate)' : ''}`,
      points: c.levels.map((l) => ({
        x: Number(l.latency.p99Ms.toFixed(3)),
        y: Number(l.throughput.toFixed(2)),
      })),
    })),
  });
  return {
    title: `${r.model}: tuning${r.latencyBudgetMs === undefined ? '' : ` for P99 ≤ ${r.latencyBudgetMs} ms`}`,
    body:
      table(['batch size', 'delay ms', 'workers × threads', 'load', 'req/s', 'p99 ms', ''], rows) +
      `<h2>Recommended serving.properties</h2><pre>${esc(servingPropertiesText(r))}</pre>` +
      `<div class="charts">${scatter}</div>`,
  };
}

function levelCharts(levels: readonly LevelResult[], axis: string, logX: boolean): string {
  const throughput = lineChart({
    title: 'Throughput',
    xLabel: axis,
    yLabel: 'requests per second',
    logX,
    series: [
      {
        name: 'throughput',
        points: levels.map((l) => ({ x: l.level, y: Number(l.throughput.toFixed(2)) })),
      },
    ],
  });
  const latency = lineChart({
    title: 'Latency',
    xLabel: axis,
    yLabel: 'milliseconds',
    logX,
    series: (['p50', 'p90', 'p99'] as const).map((p) => ({
      name: p,
      points: levels.map((l) => ({ x: l.level, y: Number(l.latency[`${p}Ms`].toFixed(3)) })),
    })),
  });
  return throughput + latency;
}

function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const head = `<tr>${header.map((h) => `<th>${esc(h)}</th>`).join('')}</tr>`;
  const body = rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('');
  return `<table>${head}${body}</table>`;
}
