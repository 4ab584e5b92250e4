import { describe, expect, it } from 'vitest';
import { groupByPast } from './past-groups.js';

describe('groupByPast', () => {
  it('keeps one run when padding costs less than another run', () => {
    expect(groupByPast([150, 140, 160], 256)).toEqual([[1, 0, 2]]);
  });

  it('splits young sequences from old ones when the padding outweighs a run', () => {
    const lengths = [300, 10, 290, 20, 12, 310];
    expect(groupByPast(lengths, 100)).toEqual([
      [1, 4, 3],
      [2, 0, 5],
    ]);
    // A costly run keeps them together.
    expect(groupByPast(lengths, 10_000)).toEqual([[1, 4, 3, 2, 0, 5]]);
  });

  it('answers nothing for no rows and one group for one row', () => {
    expect(groupByPast([], 1)).toEqual([]);
    expect(groupByPast([7], 1)).toEqual([[0]]);
  });
});
