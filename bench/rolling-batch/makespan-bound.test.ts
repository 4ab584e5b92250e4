import { describe, expect, it } from 'vitest';
import { firstComeFirstServedMs, longestFirstMs, makespanBoundMs } from './makespan-bound.js';

describe('makespanBoundMs', () => {
  it('is the work over the batch limit when everything arrives at once', () => {
    const requests = [10, 10, 10, 10].map((tokens) => ({ arrivalMs: 0, tokens }));
    expect(makespanBoundMs(requests, 2, 5)).toBe(20 * 5);
    expect(makespanBoundMs(requests, 8, 5)).toBe(10 * 5);
  });

  it('holds a long request to one token per step', () => {
    const requests = [
      { arrivalMs: 0, tokens: 100 },
      { arrivalMs: 0, tokens: 2 },
    ];
    expect(makespanBoundMs(requests, 8, 1)).toBe(100);
  });

  it('counts late work from its arrival', () => {
    const requests = [
      { arrivalMs: 0, tokens: 4 },
      { arrivalMs: 1000, tokens: 6 },
      { arrivalMs: 1000, tokens: 6 },
    ];
    // After t = 1000: 12 tokens at 2 a step, 6 steps of 10 ms.
    expect(makespanBoundMs(requests, 2, 10)).toBe(1000 + 60);
    // Measured from the first arrival.
    const later = requests.map((r) => ({ ...r, arrivalMs: r.arrivalMs + 500 }));
    expect(makespanBoundMs(later, 2, 10)).toBe(1060);
  });
});

describe('firstComeFirstServedMs', () => {
  it('admits in arrival order while a slot is free, and never beats the bound', () => {
    const requests = [
      { arrivalMs: 0, tokens: 3 },
      { arrivalMs: 0, tokens: 1 },
      { arrivalMs: 5, tokens: 2 },
    ];
    // The second leaves after step 1; the third (arrived at 5 ms) takes its slot at 10 ms.
    expect(firstComeFirstServedMs(requests, 2, 10)).toEqual({ ms: 30, steps: 3 });
    // With one slot the third waits for the first: 3 + 1 + 2 steps.
    expect(firstComeFirstServedMs(requests, 1, 10)).toEqual({ ms: 60, steps: 6 });
    expect(makespanBoundMs(requests, 2, 10)).toBeLessThanOrEqual(30);
  });

  it('waits for a late arrival with nothing running', () => {
    const requests = [
      { arrivalMs: 0, tokens: 1 },
      { arrivalMs: 100, tokens: 1 },
    ];
    expect(firstComeFirstServedMs(requests, 4, 10)).toEqual({ ms: 110, steps: 2 });
  });
});

describe('longestFirstMs', () => {
  it('admits the waiting request with the most tokens first, and finishes a burst sooner', () => {
    // One slot at a time is taken by the longest: 1 waits behind 2 and 5 though it came first.
    const burst = [
      { arrivalMs: 0, tokens: 1 },
      { arrivalMs: 0, tokens: 2 },
      { arrivalMs: 0, tokens: 5 },
    ];
    // Two slots: 5 and 2 start; 1 takes 2's slot after 2 steps; 5 ends at step 5.
    expect(longestFirstMs(burst, 2, 10)).toEqual({ ms: 50, steps: 5 });
    // First come: 1 and 2 start, 5 starts at step 2 and ends at step 6.
    expect(firstComeFirstServedMs(burst, 2, 10)).toEqual({ ms: 60, steps: 6 });
    expect(makespanBoundMs(burst, 2, 10)).toBeLessThanOrEqual(50);
  });
});
