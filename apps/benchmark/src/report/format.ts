import type { ServerSplit } from '../http/server-split.js';

/** Milliseconds with precision that suits their size: 0.0123, 1.234, 12.35, 1234.5. */
export function formatMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-';
  if (ms === 0) return '0';
  if (ms < 0.1) return ms.toFixed(4);
  if (ms < 10) return ms.toFixed(3);
  if (ms < 1000) return ms.toFixed(2);
  return ms.toFixed(1);
}

/** Requests per second. */
export function formatRate(perSecond: number): string {
  return perSecond >= 100 ? perSecond.toFixed(1) : perSecond.toFixed(2);
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

export interface TableOptions {
  /** Columns aligned left (by index); the rest align right, as numbers do. */
  readonly leftColumns?: readonly number[];
  /** Indent of every line. */
  readonly indent?: string;
}

/** A plain-text table: a header, a rule, and rows, columns padded to fit. */
export function textTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  options: TableOptions = {},
): string {
  const left = new Set(options.leftColumns ?? [0]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    (options.indent ?? '') +
    cells
      .map((c, i) => (left.has(i) ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** A level's server-side columns (queue, pre, infer, post means and mean batch), as reports show them. */
export function serverCells(server: ServerSplit | undefined): string[] {
  if (!server) return ['-', '-', '-', '-', '-'];
  return [
    formatMs(server.queue.meanMs),
    formatMs(server.preprocess.meanMs),
    formatMs(server.inference.meanMs),
    formatMs(server.postprocess.meanMs),
    server.meanBatchSize.toFixed(2),
  ];
}
