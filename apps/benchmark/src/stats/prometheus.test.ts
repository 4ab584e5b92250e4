import { describe, expect, it } from 'vitest';
import {
  histogramDelta,
  histogramOf,
  histogramQuantile,
  parsePrometheusText,
} from './prometheus.js';

const BEFORE = `
# HELP kiln_inference_seconds Engine forward time per batch
# TYPE kiln_inference_seconds histogram
kiln_inference_seconds_bucket{le="0.001",model="a"} 2
kiln_inference_seconds_bucket{le="0.002",model="a"} 4
kiln_inference_seconds_bucket{le="+Inf",model="a"} 4
kiln_inference_seconds_sum{model="a"} 0.005
kiln_inference_seconds_count{model="a"} 4
kiln_inference_seconds_bucket{le="0.001",model="b \\"quoted\\""} 9
kiln_inference_seconds_bucket{le="+Inf",model="b \\"quoted\\""} 9
kiln_inference_seconds_sum{model="b \\"quoted\\""} 0.001
kiln_inference_seconds_count{model="b \\"quoted\\""} 9
process_cpu_seconds_total 1.5 1700000000000
`;

const AFTER = BEFORE.replace('le="0.001",model="a"} 2', 'le="0.001",model="a"} 12')
  .replace('le="0.002",model="a"} 4', 'le="0.002",model="a"} 34')
  .replace('le="+Inf",model="a"} 4', 'le="+Inf",model="a"} 44')
  .replace('_sum{model="a"} 0.005', '_sum{model="a"} 0.105')
  .replace('_count{model="a"} 4', '_count{model="a"} 44');

describe('Prometheus text parsing', () => {
  it('reads samples with labels, escapes and timestamps', () => {
    const samples = parsePrometheusText(BEFORE);
    expect(samples.get('process_cpu_seconds_total')).toEqual([{ labels: {}, value: 1.5 }]);
    const b = histogramOf(samples, 'kiln_inference_seconds', { model: 'b "quoted"' });
    expect(b).toMatchObject({ count: 9, sum: 0.001 });
    expect(histogramOf(samples, 'kiln_inference_seconds', { model: 'missing' })).toBeUndefined();
  });

  it('differences two readings and estimates quantiles as histogram_quantile does', () => {
    const before = histogramOf(parsePrometheusText(BEFORE), 'kiln_inference_seconds', {
      model: 'a',
    });
    const after = histogramOf(parsePrometheusText(AFTER), 'kiln_inference_seconds', {
      model: 'a',
    })!;
    const delta = histogramDelta(before, after);
    expect(delta.count).toBe(40);
    expect(delta.sum).toBeCloseTo(0.1, 9);
    // Buckets of the interval: 10 at ≤ 1 ms, 20 in (1, 2] ms, 10 above 2 ms.
    expect(delta.buckets.map((b) => b.count)).toEqual([10, 30, 40]);
    // Rank 20 lies halfway into the (1, 2] ms bucket.
    expect(histogramQuantile(delta, 0.5)).toBeCloseTo(0.0015, 9);
    expect(histogramQuantile(delta, 0.25)).toBeCloseTo(0.001, 9);
    // In +Inf: the highest finite bound, as Prometheus answers.
    expect(histogramQuantile(delta, 0.99)).toBeCloseTo(0.002, 9);
  });

  it('refuses counters that went down (a restarted server)', () => {
    const before = histogramOf(parsePrometheusText(AFTER), 'kiln_inference_seconds', {
      model: 'a',
    });
    const after = histogramOf(parsePrometheusText(BEFORE), 'kiln_inference_seconds', {
      model: 'a',
    })!;
    expect(() => histogramDelta(before, after)).toThrow(/restarted/);
  });
});
