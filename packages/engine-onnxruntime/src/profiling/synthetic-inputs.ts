import {
  type DType,
  type DTypeStorage,
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  type TensorDescriptor,
  allocate,
  shapeSize,
} from '@kiln/core';

export interface SyntheticInputOptions {
  /** Size of the first dimension where it is dynamic. */
  readonly batchSize?: number;
  /** Size of any other dynamic dimension (e.g. a sequence length). */
  readonly dynamicSize?: number;
}

/**
 * Inputs that fit a model's signature, for profiling and benchmarks: floats uniform in
 * [0, 1) from a fixed seed, every other type zero (valid token ids, masks and indices).
 */
export function syntheticInputs(
  inputs: readonly TensorDescriptor[],
  options: SyntheticInputOptions = {},
): NDList {
  let state = 12345;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 4294967296;
  };
  return new NDList(
    inputs.map((d) => {
      if (d.shape === undefined || d.dtype === undefined) {
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `input ${d.name} declares no ${d.dtype === undefined ? 'dtype' : 'shape'}: give the inputs to profile with`,
        );
      }
      const dtype = d.dtype;
      const shape = d.shape.map((dim, i) =>
        dim >= 0 ? dim : i === 0 ? (options.batchSize ?? 1) : (options.dynamicSize ?? 16),
      );
      const data = allocate(dtype, shapeSize(shape));
      if (dtype === 'float32' || dtype === 'float64') {
        const floats = data as Float32Array | Float64Array;
        for (let i = 0; i < floats.length; i++) floats[i] = next();
      }
      return new Tensor(dtype, data as DTypeStorage[DType], shape, d.name);
    }),
  );
}
