import { describe, expect, it } from 'vitest';
import { DTYPES } from '@kiln/core';
import { randomData, seededRandom } from './random-data.js';

describe('randomData', () => {
  it('is reproducible for a seed and varies between seeds', () => {
    expect(Array.from(randomData('float32', 16, seededRandom(1)))).toEqual(
      Array.from(randomData('float32', 16, seededRandom(1))),
    );
    expect(Array.from(randomData('float32', 16, seededRandom(1)))).not.toEqual(
      Array.from(randomData('float32', 16, seededRandom(2))),
    );
  });

  it('fills every dtype with its own storage and size', () => {
    for (const dtype of DTYPES) expect(randomData(dtype, 9, seededRandom(3))).toHaveLength(9);
  });

  it('never produces NaN or infinity bit patterns for half precision', () => {
    const halves = randomData('float16', 5000, seededRandom(4));
    expect(halves.every((bits) => ((bits >> 10) & 0x1f) !== 0x1f)).toBe(true);
    const brains = randomData('bfloat16', 5000, seededRandom(5));
    expect(brains.every((bits) => ((bits >> 7) & 0xff) !== 0xff)).toBe(true);
  });
});
