import { describe, expect, it } from 'vitest';
import { makeWorkload } from './workload.js';

describe('makeWorkload', () => {
  const settings = {
    requests: 12,
    vocab: 50,
    promptMin: 8,
    promptMax: 20,
    outputMin: 8,
    outputMax: 256,
    meanGapMs: 15,
    seed: 7,
  };

  it('draws prompts of the asked lengths from a text when given one, the same each time', () => {
    const text = Array.from({ length: 100 }, (_, i) => i);
    const prompt = (pick: (bound: number) => number, length: number) => {
      const start = pick(text.length - length);
      return text.slice(start, start + length);
    };
    const a = makeWorkload({ ...settings, prompt });
    expect(makeWorkload({ ...settings, prompt })).toEqual(a);
    for (const r of a.requests) {
      expect(r.promptTokens.length).toBeGreaterThanOrEqual(8);
      expect(r.promptTokens.length).toBeLessThanOrEqual(20);
      // A window of the text: consecutive ids.
      r.promptTokens.forEach((t, i) => i > 0 && expect(t).toBe(r.promptTokens[i - 1]! + 1));
      expect(r.maxNewTokens).toBeGreaterThanOrEqual(8);
      expect(r.maxNewTokens).toBeLessThanOrEqual(256);
    }
    expect(a.arrivalsMs).toHaveLength(12);
    expect(a.arrivalsMs[0]).toBe(0);
  });
});
