import { describe, expect, it } from 'vitest';
import { LatencyHistogram } from './latency-histogram.js';

/** Nearest-rank percentile of sorted values: the smallest value with p% at or below it. */
function nearestRank(sorted: readonly number[], p: number): number {
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

describe('LatencyHistogram', () => {
  it('gives nearest-rank percentiles of 1..100 ms', () => {
    const h = new LatencyHistogram();
    for (let ms = 100; ms >= 1; ms--) h.record(ms);
    const s = h.summary();
    expect(s.count).toBe(100);
    expect(s.p50Ms).toBeCloseTo(50, 1);
    expect(s.p90Ms).toBeCloseTo(90, 1);
    expect(s.p99Ms).toBeCloseTo(99, 1);
    expect(s.meanMs).toBe(50.5);
    expect(s.minMs).toBe(1);
    expect(s.maxMs).toBe(100);
    // Bucket values never report beyond what was seen.
    expect(h.percentileMs(100)).toBe(100);
  });

  it('stays within 0.1% of exact percentiles over a skewed sample', () => {
    let state = 7;
    const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
    // Log-normal-ish latencies from 0.05 ms to a few seconds, as real ones spread.
    const values = Array.from({ length: 20_000 }, () => 0.05 * Math.exp(random() * 11));
    const h = new LatencyHistogram();
    for (const v of values) h.record(v);
    const sorted = [...values].sort((a, b) => a - b);
    for (const p of [50, 90, 99, 99.9]) {
      const exact = nearestRank(sorted, p);
      expect(Math.abs(h.percentileMs(p) - exact) / exact).toBeLessThan(0.002);
    }
    expect(h.summary().meanMs).toBeCloseTo(values.reduce((a, b) => a + b, 0) / values.length, 6);
  });

  it('merges windows and ignores values that are not latencies', () => {
    const a = new LatencyHistogram();
    const b = new LatencyHistogram();
    [1, 2, 3].forEach((v) => a.record(v));
    [4, 5].forEach((v) => b.record(v));
    b.record(Number.NaN);
    b.record(-1);
    a.add(b);
    expect(a.count).toBe(5);
    expect(a.summary().meanMs).toBe(3);
    expect(a.percentileMs(100)).toBe(5);
    expect(a.summary()).toMatchObject({ minMs: 1, maxMs: 5 });
  });

  it('summarises an empty histogram as zeros', () => {
    expect(new LatencyHistogram().summary()).toMatchObject({ count: 0, p99Ms: 0, meanMs: 0 });
  });
});
