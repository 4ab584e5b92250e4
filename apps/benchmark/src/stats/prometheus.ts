import { KilnError, KilnErrorCode } from '@kiln/core';

/** One Prometheus histogram of one label set: cumulative buckets, sum and count. */
export interface HistogramSnapshot {
  /** Upper bounds (`le`), ascending, with their cumulative counts; the last is +Inf. */
  readonly buckets: readonly { readonly le: number; readonly count: number }[];
  readonly sum: number;
  readonly count: number;
}

/** The text exposition format's samples: metric name → series (labels and value). */
export type PrometheusSamples = ReadonlyMap<
  string,
  readonly { labels: Record<string, string>; value: number }[]
>;

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/gy;

/** Parses Prometheus' text exposition format (what GET /metrics returns). */
export function parsePrometheusText(text: string): PrometheusSamples {
  const samples = new Map<string, { labels: Record<string, string>; value: number }[]>();
  for (const rawLine of text.split('\n')) {
    const line = rawLine.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    const labelText = match[2] ?? '';
    LABEL.lastIndex = 0;
    for (let label = LABEL.exec(labelText); label; label = LABEL.exec(labelText)) {
      labels[label[1]!] = label[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const value = parseValue(match[3]!);
    if (value === undefined) continue;
    const series = samples.get(match[1]!) ?? [];
    series.push({ labels, value });
    samples.set(match[1]!, series);
  }
  return samples;
}

/** The histogram `name` of the series whose labels include `labels`; undefined when absent. */
export function histogramOf(
  samples: PrometheusSamples,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): HistogramSnapshot | undefined {
  const matches = (l: Record<string, string>) =>
    Object.entries(labels).every(([k, v]) => l[k] === v);
  const buckets = (samples.get(`${name}_bucket`) ?? [])
    .filter((s) => matches(s.labels) && s.labels.le !== undefined)
    .map((s) => ({ le: parseValue(s.labels.le!) ?? Number.NaN, count: s.value }))
    .filter((b) => !Number.isNaN(b.le))
    .sort((a, b) => a.le - b.le);
  const sum = (samples.get(`${name}_sum`) ?? []).find((s) => matches(s.labels))?.value;
  const count = (samples.get(`${name}_count`) ?? []).find((s) => matches(s.labels))?.value;
  if (buckets.length === 0 || sum === undefined || count === undefined) return undefined;
  return { buckets, sum, count };
}

/** What was observed between two snapshots of one histogram (counters only grow). */
export function histogramDelta(
  before: HistogramSnapshot | undefined,
  after: HistogramSnapshot,
): HistogramSnapshot {
  if (!before) return after;
  if (after.count < before.count) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      'the server restarted while it was measured (its counters went down)',
    );
  }
  return {
    buckets: after.buckets.map((b) => ({
      le: b.le,
      count: b.count - (before.buckets.find((x) => x.le === b.le)?.count ?? 0),
    })),
    sum: after.sum - before.sum,
    count: after.count - before.count,
  };
}

/**
 * A quantile (0–1) estimated from buckets as Prometheus' histogram_quantile does: linear
 * within the bucket holding it; the highest finite bound when it falls in +Inf.
 */
export function histogramQuantile(snapshot: HistogramSnapshot, q: number): number {
  if (snapshot.count <= 0) return 0;
  const rank = q * snapshot.count;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const bucket of snapshot.buckets) {
    if (bucket.count >= rank) {
      if (!Number.isFinite(bucket.le)) return lowerBound;
      const inBucket = bucket.count - lowerCount;
      return inBucket <= 0
        ? bucket.le
        : lowerBound + ((bucket.le - lowerBound) * (rank - lowerCount)) / inBucket;
    }
    lowerBound = Number.isFinite(bucket.le) ? bucket.le : lowerBound;
    lowerCount = bucket.count;
  }
  return lowerBound;
}

function parseValue(text: string): number | undefined {
  if (text === '+Inf' || text === 'Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  const value = Number(text);
  return Number.isNaN(value) ? undefined : value;
}
