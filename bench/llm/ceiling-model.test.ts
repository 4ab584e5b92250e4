import { describe, expect, it } from 'vitest';
import {
  type CeilingRequest,
  type RunCosts,
  interpolatedCosts,
  linear,
  oneAtATime,
  rolling,
} from './ceiling-model.js';

const flat: RunCosts = { decode: () => 10, prefill: () => 10 };

describe('oneAtATime', () => {
  it('runs each request after the one before: its prefill, then a decode run a token', () => {
    const requests: CeilingRequest[] = [
      { arrivalMs: 0, promptTokens: 4, newTokens: 3 },
      { arrivalMs: 0, promptTokens: 4, newTokens: 3 },
    ];
    expect(oneAtATime(requests, flat)).toEqual({ ms: 60, tokens: 6, tokensPerS: 100, steps: 6 });
  });

  it('waits for a request that has not arrived, and charges each decode at its own past', () => {
    const pasts: number[] = [];
    const costs: RunCosts = { decode: (_, past) => (pasts.push(past), 1), prefill: () => 2 };
    const run = oneAtATime([{ arrivalMs: 100, promptTokens: 5, newTokens: 4 }], costs);
    expect(run.ms).toBe(5);
    expect(pasts).toEqual([5, 6, 7]);
  });
});

describe('rolling', () => {
  it('makes the tokens of several sequences in the same steps', () => {
    const requests: CeilingRequest[] = [
      { arrivalMs: 0, promptTokens: 4, newTokens: 3 },
      { arrivalMs: 0, promptTokens: 4, newTokens: 3 },
    ];
    // Step 1: both prefills (20 ms); steps 2 and 3: one decode run for both.
    expect(rolling(requests, flat, 2, 'padded')).toEqual({
      ms: 40,
      tokens: 6,
      tokensPerS: 150,
      steps: 3,
    });
  });

  it('with one request in flight, takes as long as one at a time', () => {
    const costs: RunCosts = { decode: (n, past) => 3 + n * past * 0.01, prefill: (t) => 5 + t };
    const requests: CeilingRequest[] = [
      { arrivalMs: 0, promptTokens: 8, newTokens: 20 },
      { arrivalMs: 3, promptTokens: 30, newTokens: 5 },
      { arrivalMs: 400, promptTokens: 12, newTokens: 9 },
    ];
    expect(rolling(requests, costs, 1, 'padded').ms).toBeCloseTo(oneAtATime(requests, costs).ms);
  });

  it('charges padded rows the longest past, ragged rows their own, split rows the cheaper cut', () => {
    const steps = (costs: RunCosts, shape: 'padded' | 'split' | 'ragged') =>
      rolling(
        [
          { arrivalMs: 0, promptTokens: 1, newTokens: 2 },
          { arrivalMs: 0, promptTokens: 9, newTokens: 2 },
        ],
        costs,
        2,
        shape,
      ).ms;
    // No fixed cost a run: padding is the only difference, and one cut removes it.
    const perPosition: RunCosts = { decode: (n, past) => n * past * 0.1, prefill: () => 0 };
    expect(steps(perPosition, 'padded')).toBeCloseTo(2 * 9 * 0.1);
    expect(steps(perPosition, 'ragged')).toBeCloseTo(2 * 5 * 0.1);
    expect(steps(perPosition, 'split')).toBeCloseTo(0.1 + 0.9);
    // A run's fixed cost above the padding's: one run is cheaper, so split pads as padded does.
    const fixed: RunCosts = { decode: (n, past) => 5 + n * past * 0.1, prefill: () => 0 };
    expect(steps(fixed, 'split')).toBeCloseTo(steps(fixed, 'padded'));
  });

  it('sends no more than the concurrency and admits each request once it has arrived', () => {
    const requests: CeilingRequest[] = Array.from({ length: 5 }, (_, i) => ({
      arrivalMs: i * 1000,
      promptTokens: 2,
      newTokens: 1,
    }));
    // Each arrives after the one before has finished: five prefills, nothing shared.
    const run = rolling(requests, flat, 4, 'padded');
    expect(run.tokens).toBe(5);
    expect(run.ms).toBe(4000 + 10);
  });
});

describe('interpolatedCosts', () => {
  const costs = interpolatedCosts({
    rows: [1, 4],
    pasts: [10, 20],
    decodeMs: [
      [1, 2],
      [4, 6],
    ],
    prompts: [8, 16],
    prefillMs: [3, 5],
  });

  it('interpolates between the measured points and extends beyond them', () => {
    expect(costs.decode(1, 15)).toBeCloseTo(1.5);
    expect(costs.decode(4, 30)).toBeCloseTo(8);
    expect(costs.decode(2.5, 10)).toBeCloseTo(2.5);
    expect(costs.prefill(24)).toBeCloseTo(7);
  });

  it('a single point is a constant', () => {
    expect(linear([3], [7], 100)).toBe(7);
  });
});
