import {
  type AnyTensor,
  type DType,
  type DTypeStorage,
  KilnError,
  KilnErrorCode,
  type Shape,
  Tensor,
  allocate,
  shapeSize,
  toBfloat16Bits,
  toFloat16Bits,
} from '@kiln/core';

type Storage = DTypeStorage[DType];
type Scalar = number | bigint | string;

const INTEGER_RANGES: Partial<Record<DType, [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
};

/**
 * A pad value as `dtype` stores it: bigint for 64-bit integers, raw half-precision bits for
 * float16/bfloat16, 0/1 for bool, '' for strings. Throws INVALID_CONFIG when the value does
 * not fit the type, rather than letting a typed array wrap it silently.
 */
export function storedPadValue(dtype: DType, value: number): Scalar {
  switch (dtype) {
    case 'string':
      return '';
    case 'bool':
      if (value !== 0 && value !== 1) throw unfit(dtype, value);
      return value;
    case 'float16':
      return toFloat16Bits(value);
    case 'bfloat16':
      return toBfloat16Bits(value);
    case 'float32':
    case 'float64':
      return value;
    default: {
      const [min, max] = INTEGER_RANGES[dtype]!;
      if (!Number.isInteger(value) || value < min || value > max) throw unfit(dtype, value);
      return dtype === 'int64' || dtype === 'uint64' ? BigInt(value) : value;
    }
  }
}

function unfit(dtype: DType, value: number): KilnError {
  return new KilnError(KilnErrorCode.InvalidConfig, `pad value ${value} does not fit ${dtype}`);
}

/** Storage for `size` elements, every one set to `fill` (a stored value). */
export function filledStorage(dtype: DType, size: number, fill: Scalar): Storage {
  const data = allocate(dtype, size);
  const zero = fill === 0 || fill === 0n || fill === '';
  if (!zero) (data as { fill(value: Scalar): unknown }).fill(fill);
  return data;
}

function strides(shape: Shape): number[] {
  const out = new Array<number>(shape.length);
  let stride = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    out[i] = stride;
    stride *= shape[i]!;
  }
  return out;
}

/**
 * Copies the leading corner `block` of a row-major array laid out as `srcShape` (from element
 * `srcBase`) into one laid out as `dstShape` (from `dstBase`). Trailing dimensions that all
 * three shapes share are copied as one contiguous run, so a pad along one axis costs one
 * `set` per row.
 */
export function copyBlock(
  src: Storage,
  srcShape: Shape,
  srcBase: number,
  dst: Storage,
  dstShape: Shape,
  dstBase: number,
  block: Shape,
): void {
  if (shapeSize(block) === 0) return;
  let outer = block.length;
  let run = 1;
  while (
    outer > 0 &&
    block[outer - 1] === srcShape[outer - 1] &&
    block[outer - 1] === dstShape[outer - 1]
  ) {
    run *= block[--outer]!;
  }
  // The next dimension in is partial, but contiguous within itself since all after it are whole.
  if (outer > 0) run *= block[--outer]!;
  const srcStrides = strides(srcShape);
  const dstStrides = strides(dstShape);
  const index = new Array<number>(outer).fill(0);
  for (;;) {
    let s = srcBase;
    let d = dstBase;
    for (let i = 0; i < outer; i++) {
      s += index[i]! * srcStrides[i]!;
      d += index[i]! * dstStrides[i]!;
    }
    copyRun(src, s, dst, d, run);
    let i = outer - 1;
    while (i >= 0 && ++index[i]! === block[i]) index[i--] = 0;
    if (i < 0) return;
  }
}

function copyRun(src: Storage, from: number, dst: Storage, to: number, count: number): void {
  if (Array.isArray(src)) {
    const target = dst as string[];
    for (let i = 0; i < count; i++) target[to + i] = src[from + i]!;
    return;
  }
  (dst as Uint8Array).set((src as Uint8Array).subarray(from, from + count), to);
}

/** The leading corner of a tensor with the given (smaller or equal) shape, as a copy. */
export function cropTensor(tensor: AnyTensor, shape: Shape): AnyTensor {
  const data = allocate(tensor.dtype, shapeSize(shape));
  copyBlock(tensor.data, tensor.shape, 0, data, shape, 0, shape);
  return new Tensor(tensor.dtype, data, shape, tensor.name);
}
