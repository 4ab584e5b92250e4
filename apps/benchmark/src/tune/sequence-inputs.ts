import {
  NDList,
  type ServingInput,
  type TensorDescriptor,
  Tensor,
  allocate,
  shapeSize,
  type DType,
  type DTypeStorage,
} from '@kiln/core';
import type { InputSpec } from '../options/shapes.js';

/** Longest length tried when the given shapes hold a dynamic axis at 1 (as a model's own do). */
export const DEFAULT_MAX_LENGTH = 64;

/** A model input with a dynamic axis other than the batch axis: requests may differ in it. */
export interface DynamicAxis {
  readonly input: number;
  readonly name: string;
  readonly axis: number;
}

/** The non-batch axes a model declares dynamic (-1), input by input. */
export function dynamicAxes(inputs: readonly TensorDescriptor[]): DynamicAxis[] {
  return inputs.flatMap((d, input) =>
    (d.shape ?? [])
      .map((dim, axis) => ({ input, name: d.name, axis, dim }))
      .filter((a) => a.axis > 0 && a.dim < 0)
      .map(({ input, name, axis }) => ({ input, name, axis })),
  );
}

/** The longest length the specs give a dynamic axis, or DEFAULT_MAX_LENGTH when all are 1. */
export function maxLengthOf(specs: readonly InputSpec[], axes: readonly DynamicAxis[]): number {
  const longest = Math.max(...axes.map((a) => specs[a.input]?.shape[a.axis] ?? 1));
  return longest > 1 ? longest : DEFAULT_MAX_LENGTH;
}

/**
 * `count` requests whose dynamic axes all take one length per request, spread evenly over
 * 1..maxLength in a shuffled order (a variable-length workload, the same every run); other
 * axes as the specs give them. Values: zeros (valid ids and masks), floats 0.5.
 */
export function variableLengthInputs(
  specs: readonly InputSpec[],
  axes: readonly DynamicAxis[],
  count: number,
  maxLength: number,
): ServingInput[] {
  return Array.from({ length: count }, (_, i) => {
    // A fixed stride walks the lengths in an order that mixes short and long neighbours.
    const length = 1 + ((i * 37) % maxLength);
    const tensors = specs.map((spec, input) => {
      const shape = spec.shape.map((dim, axis) =>
        axes.some((a) => a.input === input && a.axis === axis) ? length : dim,
      );
      const data = allocate(spec.dtype, shapeSize(shape));
      if (spec.dtype === 'float32' || spec.dtype === 'float64') (data as Float32Array).fill(0.5);
      return new Tensor(spec.dtype, data as DTypeStorage[DType], shape);
    });
    return { tensors: new NDList(tensors) };
  });
}

/** Length buckets for `bucket_boundaries`: powers of two from 8 up to, and ending at, maxLength. */
export function bucketBoundaries(maxLength: number): number[] {
  const bounds: number[] = [];
  for (let b = 8; b < maxLength; b *= 2) bounds.push(b);
  bounds.push(maxLength);
  return bounds;
}
