import { type Histogram, build } from 'hdr-histogram-js';

/** Percentiles and extremes of a set of latencies, in milliseconds. */
export interface LatencySummary {
  readonly count: number;
  readonly meanMs: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
}

export const EMPTY_SUMMARY: LatencySummary = Object.freeze({
  count: 0,
  meanMs: 0,
  minMs: 0,
  maxMs: 0,
  p50Ms: 0,
  p90Ms: 0,
  p99Ms: 0,
});

/** Recorded values are microseconds: 1 µs resolution, three significant digits beyond it. */
const US_PER_MS = 1000;

/**
 * Latencies in an HDR histogram (fixed memory however many are recorded; 0.1% precision).
 * Percentiles follow the nearest-rank rule: p50 of 1..100 is 50, p99 is 99.
 */
export class LatencyHistogram {
  private readonly histogram: Histogram = build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 3_600_000_000,
    numberOfSignificantValueDigits: 3,
    autoResize: true,
  });
  /** Exact sum and extremes: the histogram keeps bucket values, up to 0.1% off. */
  private sumMs = 0;
  private minMs = Number.POSITIVE_INFINITY;
  private maxMs = 0;

  record(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.histogram.recordValue(Math.max(1, Math.round(ms * US_PER_MS)));
    this.sumMs += ms;
    this.minMs = Math.min(this.minMs, ms);
    this.maxMs = Math.max(this.maxMs, ms);
  }

  /** Adds every value of another histogram. */
  add(other: LatencyHistogram): void {
    this.histogram.add(other.histogram);
    this.sumMs += other.sumMs;
    this.minMs = Math.min(this.minMs, other.minMs);
    this.maxMs = Math.max(this.maxMs, other.maxMs);
  }

  get count(): number {
    return this.histogram.totalCount;
  }

  /** The value at a percentile (0–100), in ms, within the values seen; 0 when empty. */
  percentileMs(percentile: number): number {
    if (this.count === 0) return 0;
    const bucketValue = this.histogram.getValueAtPercentile(percentile) / US_PER_MS;
    return Math.min(this.maxMs, Math.max(this.minMs, bucketValue));
  }

  summary(): LatencySummary {
    if (this.count === 0) return EMPTY_SUMMARY;
    return {
      count: this.count,
      meanMs: this.sumMs / this.count,
      minMs: this.minMs,
      maxMs: this.maxMs,
      p50Ms: this.percentileMs(50),
      p90Ms: this.percentileMs(90),
      p99Ms: this.percentileMs(99),
    };
  }
}
