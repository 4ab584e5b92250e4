import { describe, expect, it } from 'vitest';
import { formatSpread, goalLine, ratioSpread, spreadOf } from './figures.js';
import { alternateRounds, orderOf } from './rounds.js';

describe('alternateRounds', () => {
  it('swaps two contenders each round (A B, B A, …) and records warm-ups nowhere', async () => {
    const log: string[] = [];
    const contender = (name: string, figure: number) => ({
      name,
      measure: async (round: number) => {
        log.push(`${name}${round}`);
        return figure + round;
      },
    });
    const figures = await alternateRounds([contender('a', 10), contender('b', 20)], {
      rounds: 3,
      warmupRounds: 1,
    });
    expect(log).toEqual(['b-1', 'a-1', 'a0', 'b0', 'b1', 'a1', 'a2', 'b2']);
    expect(figures).toEqual({ a: [10, 11, 12], b: [20, 21, 22] });
  });

  it('rotates three or more contenders', () => {
    expect([0, 1, 2].map((r) => orderOf(['a', 'b', 'c'], r).join(''))).toEqual([
      'abc',
      'bca',
      'cab',
    ]);
  });
});

describe('figures', () => {
  it('takes ratios within rounds, so a figure and its ratio never disagree in direction', () => {
    // Round by round Kiln is slower, although its best round beats raw's worst.
    const kiln = [90, 95, 100];
    const raw = [100, 100, 120];
    const ratio = ratioSpread(kiln, raw);
    expect(ratio.median).toBeCloseTo(0.9);
    expect(ratio.max).toBeLessThan(1);
  });

  it('prints median [min–max] and the goal with its verdict', () => {
    expect(formatSpread(spreadOf([3, 1, 2]))).toBe('2.0 [1.0–3.0]');
    expect(goalLine('x ÷ y', spreadOf([1.5, 2.5, 2.1]), { atLeast: 2 })).toBe(
      'x ÷ y: 2.10 [1.50–2.50]× (goal ≥ 2×: meets)',
    );
    expect(goalLine('/ping p99', spreadOf([6, 7, 8]), { atMost: 5 }, ' ms', 1)).toBe(
      '/ping p99: 7.0 [6.0–8.0] ms (goal ≤ 5 ms: misses)',
    );
  });

  it('refuses ratios over different numbers of rounds', () => {
    expect(() => ratioSpread([1, 2], [1])).toThrow(/rounds/);
  });
});
