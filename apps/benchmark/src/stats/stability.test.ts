import { describe, expect, it } from 'vitest';
import { isStable } from './stability.js';

const w = (throughput: number, meanLatencyMs: number) => ({ throughput, meanLatencyMs });

describe('isStable (perf_analyzer rule: 3 windows within 10%)', () => {
  it('needs three windows', () => {
    expect(isStable([w(100, 5), w(100, 5)])).toBe(false);
    expect(isStable([w(100, 5), w(100, 5), w(100, 5)])).toBe(true);
  });

  it('accepts windows within 10% of their mean and refuses one beyond it', () => {
    expect(isStable([w(95, 5), w(100, 5.2), w(105, 4.8)])).toBe(true);
    // mean 104: 115 strays by 10.6%.
    expect(isStable([w(97, 5), w(100, 5), w(115, 5)])).toBe(false);
  });

  it('checks latency as well as throughput', () => {
    expect(isStable([w(100, 5), w(100, 5), w(100, 6.5)])).toBe(false);
  });

  it('looks only at the last windows, so a warming level can settle', () => {
    expect(isStable([w(10, 50), w(60, 9), w(100, 5), w(101, 5), w(99, 5.1)])).toBe(true);
  });

  it('never calls windows without completions stable', () => {
    expect(isStable([w(0, 0), w(0, 0), w(0, 0)])).toBe(false);
  });

  it('takes a stricter rule', () => {
    const samples = [w(95, 5), w(100, 5), w(105, 5), w(100, 5)];
    expect(isStable(samples, { windows: 4, tolerance: 0.1 })).toBe(true);
    expect(isStable(samples, { windows: 4, tolerance: 0.02 })).toBe(false);
  });
});
