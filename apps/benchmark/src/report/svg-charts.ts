/** Self-contained SVG charts: no script, no fonts or styles from elsewhere. */

export const CHART_COLORS = [
  '#2563eb',
  '#dc2626',
  '#16a34a',
  '#d97706',
  '#7c3aed',
  '#0891b2',
  '#db2777',
  '#65a30d',
  '#4b5563',
  '#9333ea',
] as const;

export interface Point {
  readonly x: number;
  readonly y: number;
}

export interface LineSeries {
  readonly name: string;
  readonly points: readonly Point[];
}

export interface LineChartOptions {
  readonly title: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly LineSeries[];
  /** Place x on a log scale (concurrency sweeps that double, latencies that spread widely). */
  readonly logX?: boolean;
  readonly width?: number;
  readonly height?: number;
}

/** A line chart with a marker per data point (`circle.point`, its values in data-x/data-y). */
export function lineChart(options: LineChartOptions): string {
  const width = options.width ?? 640;
  const height = options.height ?? 360;
  const legendLayout = layoutLegend(
    options.series.map((s) => s.name),
    width - 72 - 24,
  );
  const margin = { left: 72, right: 24, top: 44 + legendLayout.rows * 16, bottom: 56 };
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const points = options.series.flatMap((s) => s.points);
  const xs = points.map((p) => p.x);
  const transform = options.logX
    ? (x: number) => Math.log2(Math.max(x, Number.MIN_VALUE))
    : (x: number) => x;
  const xTicks = options.logX ? logTicks(xs) : niceTicks(Math.min(...xs, 0), Math.max(...xs, 1));
  // A log axis spans the data; a linear one spans its round ticks.
  const xMin = options.logX ? (xs.length ? transform(Math.min(...xs)) : 0) : xTicks[0]!;
  const xMax = options.logX ? (xs.length ? transform(Math.max(...xs)) : 1) : xTicks.at(-1)!;
  const yTicks = niceTicks(0, Math.max(0, ...points.map((p) => p.y)));
  const yMax = yTicks.at(-1)!;
  const xPos = (x: number) =>
    margin.left + (xMax === xMin ? plotW / 2 : ((transform(x) - xMin) / (xMax - xMin)) * plotW);
  const yPos = (y: number) => margin.top + plotH - (yMax === 0 ? 0 : (y / yMax) * plotH);

  const parts: string[] = [];
  for (const tick of yTicks) {
    const y = yPos(tick);
    parts.push(
      `<line class="grid" x1="${margin.left}" x2="${margin.left + plotW}" y1="${f(y)}" y2="${f(y)}" stroke="#e5e7eb"/>`,
    );
    parts.push(
      `<text x="${margin.left - 8}" y="${f(y + 4)}" text-anchor="end" font-size="11" fill="#374151">${tickLabel(tick)}</text>`,
    );
  }
  for (const tick of xTicks) {
    const x = xPos(tick);
    parts.push(
      `<line x1="${f(x)}" x2="${f(x)}" y1="${margin.top + plotH}" y2="${margin.top + plotH + 5}" stroke="#6b7280"/>`,
    );
    parts.push(
      `<text x="${f(x)}" y="${margin.top + plotH + 18}" text-anchor="middle" font-size="11" fill="#374151">${tickLabel(tick)}</text>`,
    );
  }
  parts.push(axes(margin.left, margin.top, plotW, plotH));
  options.series.forEach((series, i) => {
    const color = CHART_COLORS[i % CHART_COLORS.length];
    const sorted = [...series.points].sort((a, b) => a.x - b.x);
    if (sorted.length > 1) {
      const path = sorted.map((p) => `${f(xPos(p.x))},${f(yPos(p.y))}`).join(' ');
      parts.push(
        `<polyline class="series" data-series="${esc(series.name)}" points="${path}" fill="none" stroke="${color}" stroke-width="2"/>`,
      );
    }
    for (const p of sorted) {
      parts.push(
        `<circle class="point" data-series="${esc(series.name)}" data-x="${p.x}" data-y="${p.y}" cx="${f(xPos(p.x))}" cy="${f(yPos(p.y))}" r="4" fill="${color}"><title>${esc(series.name)}: ${tickLabel(p.y)} at ${tickLabel(p.x)}</title></circle>`,
      );
    }
  });
  parts.push(drawLegend(legendLayout, margin.left, 44));
  parts.push(
    `<text x="${margin.left + plotW / 2}" y="${height - 12}" text-anchor="middle" font-size="12" fill="#111827">${esc(options.xLabel)}</text>`,
  );
  parts.push(
    `<text transform="translate(16 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle" font-size="12" fill="#111827">${esc(options.yLabel)}</text>`,
  );
  return svg(width, height, options.title, parts);
}

export interface BarSeries {
  readonly name: string;
  /** One value per category. */
  readonly values: readonly number[];
}

export interface BarChartOptions {
  readonly title: string;
  readonly valueLabel: string;
  /** One row per category (a layer, a stage), top to bottom. */
  readonly categories: readonly string[];
  readonly series: readonly BarSeries[];
  /** Category subtitles drawn after the name (e.g. a layer's operator type). */
  readonly notes?: readonly string[];
  readonly width?: number;
}

/** Horizontal bars, grouped per category (`rect.bar`, its value in data-value). */
export function barChart(options: BarChartOptions): string {
  const width = options.width ?? 720;
  const labels = options.categories.map((c, i) =>
    options.notes?.[i] ? `${c} (${options.notes[i]})` : c,
  );
  // Long labels (layer paths) wrap onto more lines, whole: a cut name could match two layers.
  const labelLines = labels.map((l) => wrapLabel(l, LABEL_LINE_CHARS));
  const labelWidth = Math.max(
    60,
    ...labelLines.flat().map((line) => line.length * LABEL_CHAR_WIDTH),
  );
  const legendLayout = layoutLegend(
    options.series.map((s) => s.name),
    width - labelWidth - 88,
  );
  const legendRows = options.series.length > 1 ? legendLayout.rows : 0;
  const margin = { left: labelWidth + 16, right: 72, top: 44 + legendRows * 16, bottom: 44 };
  const barH = 14;
  const barsH = options.series.length * barH;
  // Each category's row is as tall as its bars or its label's lines, whichever is taller.
  const rowHeights = labelLines.map((lines) => Math.max(barsH, lines.length * LABEL_LINE_H) + 10);
  const rowTops = rowHeights.map((_, row) =>
    rowHeights.slice(0, row).reduce((sum, h) => sum + h, 0),
  );
  const plotW = width - margin.left - margin.right;
  const plotH = Math.max(
    barsH + 10,
    rowHeights.reduce((sum, h) => sum + h, 0),
  );
  const height = margin.top + plotH + margin.bottom;
  const ticks = niceTicks(0, Math.max(0, ...options.series.flatMap((s) => s.values)));
  const max = ticks.at(-1)!;
  const xPos = (v: number) => margin.left + (max === 0 ? 0 : (v / max) * plotW);

  const parts: string[] = [];
  for (const tick of ticks) {
    const x = xPos(tick);
    parts.push(
      `<line class="grid" x1="${f(x)}" x2="${f(x)}" y1="${margin.top}" y2="${margin.top + plotH}" stroke="#e5e7eb"/>`,
    );
    parts.push(
      `<text x="${f(x)}" y="${margin.top + plotH + 16}" text-anchor="middle" font-size="11" fill="#374151">${tickLabel(tick)}</text>`,
    );
  }
  parts.push(axes(margin.left, margin.top, plotW, plotH));
  options.categories.forEach((category, row) => {
    const top = margin.top + rowTops[row]! + 5;
    const lines = labelLines[row]!;
    const firstBaseline = top + (rowHeights[row]! - 10 - lines.length * LABEL_LINE_H) / 2 + 10;
    const tspans = lines
      .map(
        (line, i) =>
          `<tspan x="${margin.left - 8}" y="${f(firstBaseline + i * LABEL_LINE_H)}">${esc(line)}</tspan>`,
      )
      .join('');
    parts.push(
      `<text class="label" text-anchor="end" font-size="11" fill="#111827">${tspans}</text>`,
    );
    options.series.forEach((series, i) => {
      const value = series.values[row] ?? 0;
      const y = top + (rowHeights[row]! - 10 - barsH) / 2 + i * barH;
      const color = CHART_COLORS[i % CHART_COLORS.length];
      parts.push(
        `<rect class="bar" data-category="${esc(category)}" data-series="${esc(series.name)}" data-value="${value}" x="${margin.left}" y="${f(y)}" width="${f(Math.max(0, xPos(value) - margin.left))}" height="${barH - 2}" fill="${color}"><title>${esc(category)} ${esc(series.name)}: ${tickLabel(value)}</title></rect>`,
      );
      parts.push(
        `<text x="${f(xPos(value) + 4)}" y="${f(y + barH - 4)}" font-size="10" fill="#374151">${tickLabel(value)}</text>`,
      );
    });
  });
  if (options.series.length > 1) parts.push(drawLegend(legendLayout, margin.left, 44));
  parts.push(
    `<text x="${margin.left + plotW / 2}" y="${height - 10}" text-anchor="middle" font-size="12" fill="#111827">${esc(options.valueLabel)}</text>`,
  );
  return svg(width, height, options.title, parts);
}

/** Round tick values from `min` to at least `max`, about five of them. */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!(max > min)) return [min, min + 1];
  const rough = (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough)!;
  const ticks: number[] = [];
  for (let t = Math.floor(min / step) * step; t < max + step * 0.999; t += step)
    ticks.push(Number(t.toFixed(10)));
  return ticks;
}

function svg(width: number, height: number, title: string, parts: readonly string[]): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="kiln-chart" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(title)}" font-family="system-ui, sans-serif">`,
    `<title>${esc(title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="16" y="22" font-size="15" font-weight="600" fill="#111827">${esc(title)}</text>`,
    ...parts,
    '</svg>',
  ].join('\n');
}

function axes(left: number, top: number, plotW: number, plotH: number): string {
  return `<path class="axes" d="M${left},${top} V${top + plotH} H${left + plotW}" fill="none" stroke="#6b7280"/>`;
}

interface LegendLayout {
  readonly items: readonly { readonly name: string; readonly dx: number; readonly row: number }[];
  readonly rows: number;
}

/** Places legend items left to right, wrapping onto new rows within `width`. */
function layoutLegend(names: readonly string[], width: number): LegendLayout {
  const items: { name: string; dx: number; row: number }[] = [];
  let dx = 0;
  let row = 0;
  for (const name of names) {
    const itemWidth = 24 + name.length * 6.5;
    if (dx > 0 && dx + itemWidth > width) {
      row++;
      dx = 0;
    }
    items.push({ name, dx, row });
    dx += itemWidth;
  }
  return { items, rows: names.length === 0 ? 0 : row + 1 };
}

function drawLegend(layout: LegendLayout, left: number, top: number): string {
  return layout.items
    .map(({ name, dx, row }, i) => {
      const x = left + dx;
      const y = top + row * 16;
      return `<g class="legend"><rect x="${f(x)}" y="${y - 9}" width="10" height="10" fill="${CHART_COLORS[i % CHART_COLORS.length]}"/><text x="${f(x + 14)}" y="${y}" font-size="11" fill="#374151">${esc(name)}</text></g>`;
    })
    .join('');
}

/** Ticks for a log axis: the values themselves when few, else 1-2-5 steps across the range. */
function logTicks(values: readonly number[]): number[] {
  const distinct = [...new Set(values)].sort((a, b) => a - b);
  if (distinct.length <= 8) return distinct;
  const min = distinct[0]!;
  const max = distinct.at(-1)!;
  const ticks: number[] = [];
  for (
    let decade = 10 ** Math.floor(Math.log10(Math.max(min, Number.MIN_VALUE)));
    decade <= max;
    decade *= 10
  ) {
    for (const step of [1, 2, 5]) {
      const tick = Number((decade * step).toPrecision(6));
      if (tick >= min && tick <= max) ticks.push(tick);
    }
  }
  return ticks.length > 0 ? ticks : [min, max];
}

function tickLabel(value: number): string {
  if (value === 0) return '0';
  const abs = Math.abs(value);
  if (abs >= 10_000) return `${Number((value / 1000).toFixed(1))}k`;
  if (abs >= 100) return String(Math.round(value));
  if (abs >= 1) return String(Number(value.toFixed(2)));
  return String(Number(value.toPrecision(2)));
}

/** A bar label's line: about this many characters at 11 px fit the label column. */
const LABEL_LINE_CHARS = 46;
const LABEL_CHAR_WIDTH = 6.5;
const LABEL_LINE_H = 13;

/**
 * `text` in lines of at most `max` characters, broken after a path or name separator
 * (`/ . _ - :` or a space) where one falls in the line, else at `max`. Nothing is left out.
 */
export function wrapLabel(text: string, max: number): string[] {
  const lines: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const head = rest.slice(0, max);
    const at = Math.max(...['/', '.', '_', '-', ':', ' '].map((c) => head.lastIndexOf(c)));
    const cut = at > 0 ? at + 1 : max;
    lines.push(rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
  }
  lines.push(rest);
  return lines;
}

function f(n: number): string {
  return String(Math.round(n * 10) / 10);
}

/** Escapes text for XML content and attribute values. */
export function esc(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}
