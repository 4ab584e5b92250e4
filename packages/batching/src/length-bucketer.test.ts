import { KilnErrorCode } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { JobQueue } from './job-queue.js';
import { lengthBucketer } from './length-bucketer.js';

describe('lengthBucketer', () => {
  const bucketOf = lengthBucketer([16, 32, 64, 128, 256, 512], (ids: number[]) => ids.length);
  const ofLength = (n: number) => bucketOf(new Array<number>(n).fill(1));

  it('puts a length in the smallest bucket that holds it', () => {
    expect([0, 1, 16, 17, 32, 33, 100, 128, 129, 511, 512].map(ofLength)).toEqual([
      16, 16, 16, 32, 32, 64, 128, 128, 256, 512, 512,
    ]);
  });

  it('gathers lengths beyond the last boundary in one overflow bucket', () => {
    expect(ofLength(513)).toBe(Infinity);
    expect(ofLength(5000)).toBe(Infinity);
  });

  it('refuses boundaries that are empty, unordered or not positive integers', () => {
    for (const bad of [[], [16, 16], [32, 16], [0, 8], [1.5], [Number.NaN]]) {
      expect(() => lengthBucketer(bad, () => 1)).toThrow(
        expect.objectContaining({ code: KilnErrorCode.InvalidConfig }),
      );
    }
  });

  it('refuses a length that is not a non-negative integer', () => {
    const byValue = lengthBucketer([4], (n: number) => n);
    for (const bad of [-1, 2.5, Number.NaN, Infinity]) {
      expect(() => byValue(bad)).toThrow(
        expect.objectContaining({ code: KilnErrorCode.InvalidInput }),
      );
    }
  });

  it('keeps short inputs out of long inputs’ batches in a JobQueue', async () => {
    const queue = new JobQueue<number[], void>({ bucketOf });
    for (const n of [300, 10, 400, 12, 20]) queue.submit(new Array<number>(n).fill(0));
    const lengths = async () =>
      (await queue.takeBatch({ maxSize: 8, maxDelayMs: 0 })).map((j) => j.input.length);
    expect(await lengths()).toEqual([300, 400]);
    expect(await lengths()).toEqual([10, 12]);
    expect(await lengths()).toEqual([20]);
  });
});
