import {
  type DType,
  type DTypeStorage,
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  type TensorDescriptor,
  allocate,
  describeTensorDescriptor,
  formatShape,
  shapeMatches,
  shapeSize,
  toFloat16Bits,
} from '@kiln/core';
import type { InputSpec } from '../options/shapes.js';

/**
 * Input tensors for the specs, named after the model's inputs where they are known: floats
 * uniform in [0, 1) from a fixed seed (so every run sends the same data), every other type
 * zero (valid token ids, masks and indices).
 */
export function syntheticTensors(
  specs: readonly InputSpec[],
  names: readonly (string | undefined)[] = [],
): NDList {
  const random = seeded(20240611);
  return new NDList(
    specs.map((spec, i) => {
      const data = allocate(spec.dtype, shapeSize(spec.shape));
      fill(spec.dtype, data, random);
      return new Tensor(spec.dtype, data as DTypeStorage[DType], spec.shape, names[i]);
    }),
  );
}

/** Specs for a model's declared inputs: dynamic dimensions become `batchSize` (first) or 1. */
export function specsFromSignature(
  inputs: readonly TensorDescriptor[],
  batchSize = 1,
): InputSpec[] {
  return inputs.map((d) => {
    if (d.shape === undefined || d.dtype === undefined) {
      throw new KilnError(
        KilnErrorCode.ShapeMismatch,
        `input ${d.name} declares no ${d.dtype === undefined ? 'dtype' : 'shape'}: give the input shapes (and dtypes) to run with`,
      );
    }
    return {
      dtype: d.dtype,
      shape: d.shape.map((dim, i) => (dim >= 0 ? dim : i === 0 ? batchSize : 1)),
    };
  });
}

/**
 * Checks specs against a model's declared inputs (count, dtype, rank and fixed
 * dimensions); SHAPE_MISMATCH says what the model expects.
 */
export function checkSpecsAgainst(
  specs: readonly InputSpec[],
  inputs: readonly TensorDescriptor[],
): void {
  if (inputs.length === 0) return;
  const expected = inputs.map(describeTensorDescriptor).join(', ');
  if (specs.length !== inputs.length) {
    throw new KilnError(
      KilnErrorCode.ShapeMismatch,
      `the model takes ${inputs.length} input${inputs.length === 1 ? '' : 's'} (${expected}) but ${specs.length} shape${specs.length === 1 ? ' was' : 's were'} given`,
    );
  }
  specs.forEach((spec, i) => {
    const input = inputs[i]!;
    const dtypeFits = input.dtype === undefined || spec.dtype === input.dtype;
    const shapeFits = input.shape === undefined || shapeMatches(input.shape, spec.shape);
    if (!dtypeFits || !shapeFits) {
      throw new KilnError(
        KilnErrorCode.ShapeMismatch,
        `input ${input.name} is ${input.dtype ?? 'any dtype'}${input.shape ? formatShape(input.shape) : ''} but ${spec.dtype}${formatShape(spec.shape)} was given (-1 = any size)`,
      );
    }
  });
}

function fill(dtype: DType, data: DTypeStorage[DType], random: () => number): void {
  if (dtype === 'float32' || dtype === 'float64') {
    const floats = data as Float32Array | Float64Array;
    for (let i = 0; i < floats.length; i++) floats[i] = random();
  } else if (dtype === 'float16') {
    const bits = data as Uint16Array;
    for (let i = 0; i < bits.length; i++) bits[i] = toFloat16Bits(random());
  }
}

/** A small linear congruential generator: the same numbers on every run and platform. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 4294967296;
  };
}
