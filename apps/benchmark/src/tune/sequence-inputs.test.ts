import { describe, expect, it } from 'vitest';
import {
  DEFAULT_MAX_LENGTH,
  bucketBoundaries,
  dynamicAxes,
  maxLengthOf,
  variableLengthInputs,
} from './sequence-inputs.js';

const inputs = [
  { name: 'input_ids', dtype: 'int64' as const, shape: [-1, -1] },
  { name: 'pixels', dtype: 'float32' as const, shape: [-1, 3] },
];

describe('variable-length inputs for --tune', () => {
  it('finds the dynamic axes past the batch axis', () => {
    expect(dynamicAxes(inputs)).toEqual([{ input: 0, name: 'input_ids', axis: 1 }]);
    expect(dynamicAxes([{ name: 'x', shape: [-1, 4] }])).toEqual([]);
  });

  it('takes the longest length from the shapes given, else a default', () => {
    const axes = dynamicAxes(inputs);
    const specs = (n: number) => [
      { dtype: 'int64' as const, shape: [1, n] },
      { dtype: 'float32' as const, shape: [1, 3] },
    ];
    expect(maxLengthOf(specs(40), axes)).toBe(40);
    expect(maxLengthOf(specs(1), axes)).toBe(DEFAULT_MAX_LENGTH);
  });

  it('spreads lengths over 1..max, varying only the dynamic axes', () => {
    const axes = dynamicAxes(inputs);
    const specs = [
      { dtype: 'int64' as const, shape: [1, 16] },
      { dtype: 'float32' as const, shape: [1, 3] },
    ];
    const requests = variableLengthInputs(specs, axes, 32, 16);
    const lengths = requests.map((r) => r.tensors!.tensors[0]!.shape[1]);
    expect(new Set(lengths).size).toBe(16);
    expect(Math.min(...lengths)).toBe(1);
    expect(Math.max(...lengths)).toBe(16);
    expect(requests.every((r) => r.tensors!.tensors[1]!.shape.join() === '1,3')).toBe(true);
  });

  it('bounds buckets by powers of two up to the longest length', () => {
    expect(bucketBoundaries(100)).toEqual([8, 16, 32, 64, 100]);
    expect(bucketBoundaries(16)).toEqual([8, 16]);
    expect(bucketBoundaries(4)).toEqual([4]);
  });
});
