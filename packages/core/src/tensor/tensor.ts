import { KilnError, KilnErrorCode } from '../errors.js';
import {
  type DType,
  type DTypeStorage,
  type NumericDType,
  type TypedArray,
  allocate,
  bytesOf,
  isNumericDType,
  storageMatches,
  viewBytes,
} from './dtype.js';
import { type Shape, assertConcreteShape, formatShape, shapeSize } from './shape.js';

/**
 * An n-dimensional array held in row-major order. The data is never copied by the
 * constructor: a Tensor is a view over the storage it was given.
 */
export class Tensor<D extends DType = DType> {
  readonly dtype: D;
  readonly shape: Shape;
  readonly data: DTypeStorage[D];
  /** Optional name: the model input/output it belongs to. */
  readonly name: string | undefined;

  constructor(dtype: D, data: DTypeStorage[D], shape: Shape, name?: string) {
    assertConcreteShape(shape);
    if (!storageMatches(dtype, data)) {
      throw new KilnError(
        KilnErrorCode.MalformedTensor,
        `${dtype} tensor cannot hold ${data.constructor.name} data`,
      );
    }
    const size = shapeSize(shape);
    if (data.length !== size) {
      throw new KilnError(
        KilnErrorCode.MalformedTensor,
        `shape ${formatShape(shape)} needs ${size} elements but the data has ${data.length}`,
      );
    }
    this.dtype = dtype;
    this.data = data;
    this.shape = Object.freeze([...shape]);
    this.name = name;
  }

  static zeros<D extends DType>(dtype: D, shape: Shape, name?: string): Tensor<D> {
    assertConcreteShape(shape);
    return new Tensor(dtype, allocate(dtype, shapeSize(shape)), shape, name);
  }

  /** A zero-copy tensor over raw little-endian bytes. */
  static fromBytes<D extends NumericDType>(
    dtype: D,
    bytes: Uint8Array,
    shape: Shape,
    name?: string,
  ): Tensor<D> {
    return new Tensor(dtype, viewBytes(dtype, bytes) as DTypeStorage[D], shape, name);
  }

  get size(): number {
    return this.data.length;
  }

  get rank(): number {
    return this.shape.length;
  }

  /** Raw little-endian bytes of numeric data (a view, not a copy). */
  bytes(): Uint8Array {
    if (!isNumericDType(this.dtype)) {
      throw new KilnError(
        KilnErrorCode.UnsupportedDType,
        'string tensors have no fixed-width bytes',
      );
    }
    return bytesOf(this.data as TypedArray);
  }

  withName(name: string | undefined): Tensor<D> {
    return new Tensor(this.dtype, this.data, this.shape, name);
  }

  reshape(shape: Shape): Tensor<D> {
    return new Tensor(this.dtype, this.data, shape, this.name);
  }

  /** The element at a flat index as a JS value (bigint for 64-bit integers). */
  at(index: number): number | bigint | string | boolean {
    const value = this.data[index];
    if (this.dtype === 'bool') return value !== 0;
    return value as number | bigint | string;
  }

  /** Nested JS arrays, for JSON and debugging. 64-bit integers become numbers when safe. */
  toNested(): unknown {
    const flat = Array.from(this.data as ArrayLike<unknown>, (value) =>
      toJsonScalar(this.dtype, value),
    );
    return nest(flat, this.shape);
  }

  toString(): string {
    return `Tensor(${this.name ?? ''}${this.name ? ': ' : ''}${this.dtype}${formatShape(this.shape)})`;
  }
}

export type AnyTensor = Tensor<DType>;

function toJsonScalar(dtype: DType, value: unknown): unknown {
  if (dtype === 'bool') return value !== 0;
  if (typeof value === 'bigint') {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  return value;
}

function nest(flat: unknown[], shape: Shape): unknown {
  if (shape.length === 0) return flat[0];
  const build = (offset: number, depth: number): unknown[] => {
    const dim = shape[depth]!;
    if (depth === shape.length - 1) return flat.slice(offset, offset + dim);
    const stride = shapeSize(shape.slice(depth + 1));
    return Array.from({ length: dim }, (_, i) => build(offset + i * stride, depth + 1));
  };
  return build(0, 0);
}
