import { describe, expect, it } from 'vitest';
import { type Contender, interleavedRounds, median, medianOf, quantile } from './interleave.js';

describe('interleavedRounds', () => {
  it('rotates who goes first each round and runs every contender the same number of calls', async () => {
    const log: string[] = [];
    const contender = (name: string): Contender => ({
      name,
      call: async () => void log.push(name),
    });
    const results = await interleavedRounds([contender('a'), contender('b'), contender('c')], 3, 2);
    expect(log.join('')).toBe('aabbcc' + 'bbccaa' + 'ccaabb');
    expect(results).toHaveLength(3);
    expect(Object.keys(results[0]!.msPerCall).sort()).toEqual(['a', 'b', 'c']);
  });

  it('measures time per call', async () => {
    const sleeper: Contender = {
      name: 's',
      call: () => new Promise((resolve) => setTimeout(resolve, 5)),
    };
    const [round] = await interleavedRounds([sleeper], 1, 4);
    expect(round!.msPerCall.s).toBeGreaterThanOrEqual(4);
  });
});

describe('median', () => {
  it('summarises per-round ratios robustly', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(quantile([10, 20, 30, 40, 50], 0.25)).toBe(20);
    expect(quantile([1, 2], 0.75)).toBe(1.75);
    const results = [
      { msPerCall: { raw: 10, kiln: 11 } },
      { msPerCall: { raw: 10, kiln: 50 } },
      { msPerCall: { raw: 10, kiln: 10 } },
    ];
    expect(medianOf(results, (r) => r.raw! / r.kiln!)).toBeCloseTo(10 / 11);
  });
});
