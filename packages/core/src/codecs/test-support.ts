import fc from 'fast-check';
import { expect } from 'vitest';
import { KilnError, type KilnErrorCode } from '../errors.js';
import {
  type DType,
  type DTypeStorage,
  type TensorData,
  bytesPerElement,
  isNumericDType,
  viewBytes,
} from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import type { Shape } from '../tensor/shape.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { fromBfloat16Bits, fromFloat16Bits } from './float16.js';

/** Shapes that trip codecs up: 0-d, zero-size dimensions, and small ordinary ones. */
export const shapeArb: fc.Arbitrary<number[]> = fc.oneof(
  fc.constantFrom<number[]>([], [0], [0, 3], [2, 0, 5], [1, 1, 1]),
  fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 }),
);

export const nameArb = fc.string({ unit: 'binary', minLength: 1, maxLength: 12 });

function size(shape: Shape): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Data for `count` elements: random bit patterns for numbers (NaN payloads included). */
export function dataArb(dtype: DType, count: number): fc.Arbitrary<TensorData> {
  if (dtype === 'string') {
    return fc.array(fc.string({ unit: 'binary', maxLength: 8 }), {
      minLength: count,
      maxLength: count,
    });
  }
  if (dtype === 'bool') {
    return fc
      .array(fc.boolean(), { minLength: count, maxLength: count })
      .map((bits) => Uint8Array.from(bits, Number));
  }
  const length = count * bytesPerElement(dtype);
  return fc
    .uint8Array({ minLength: length, maxLength: length })
    .map((bytes) => viewBytes(dtype, bytes));
}

export function tensorArb(
  dtype: DType,
  name: fc.Arbitrary<string | undefined> = fc.constant(undefined),
) {
  return fc
    .tuple(shapeArb, name)
    .chain(([shape, tensorName]) =>
      dataArb(dtype, size(shape)).map(
        (data) => new Tensor<DType>(dtype, data as DTypeStorage[DType], shape, tensorName),
      ),
    );
}

/** Lists of tensors of the given dtypes; names unique when present, as multi-tensor formats need. */
export function listArb(
  dtypes: readonly DType[],
  naming: 'named' | 'unnamed' | 'mixed',
): fc.Arbitrary<NDList> {
  const name: fc.Arbitrary<string | undefined> =
    naming === 'named'
      ? nameArb
      : naming === 'unnamed'
        ? fc.constant(undefined)
        : fc.option(nameArb, { nil: undefined });
  return fc
    .array(
      fc.constantFrom(...dtypes).chain((dtype) => tensorArb(dtype, name)),
      { maxLength: 4 },
    )
    .filter((tensors) => {
      const names = tensors.map((t) => t.name).filter((n) => n !== undefined);
      return new Set(names).size === names.length && !names.some((n) => /^arr_\d+$/.test(n));
    })
    .map((tensors) => new NDList(tensors));
}

/** Exact equality: dtype, shape, name and the very bytes (or strings). */
export function expectSameTensor(
  actual: AnyTensor,
  expected: AnyTensor,
  name = expected.name,
): void {
  expect(actual.dtype).toBe(expected.dtype);
  expect(actual.shape).toEqual(expected.shape);
  expect(actual.name).toBe(name);
  if (isNumericDType(expected.dtype)) {
    expect(Buffer.compare(actual.bytes(), expected.bytes())).toBe(0);
  } else {
    expect(actual.data).toEqual(expected.data);
  }
}

export function expectSameList(actual: NDList, expected: NDList, names = expected.names): void {
  expect(actual.length).toBe(expected.length);
  expected.tensors.forEach((tensor, i) => expectSameTensor(actual.get(i), tensor, names[i]));
}

/** Names a format gives a list that requires one: numpy's arr_0, arr_1… for the unnamed. */
export function defaultNames(list: NDList): string[] {
  let unnamed = 0;
  return list.names.map((name) => name ?? `arr_${unnamed++}`);
}

/** What survives JSON: values as numbers (NaN payloads and the sign of zero do not). */
export function jsonValues(tensor: AnyTensor): unknown[] {
  const read =
    tensor.dtype === 'float16'
      ? fromFloat16Bits
      : tensor.dtype === 'bfloat16'
        ? fromBfloat16Bits
        : (x: unknown) => x;
  return Array.from(tensor.data as ArrayLike<unknown>, (value) => {
    const v = read(value as number);
    return typeof v === 'number' && v === 0
      ? 0
      : typeof v === 'number' && Number.isNaN(v)
        ? 'NaN'
        : v;
  });
}

/** Runs `fn` and expects a KilnError (of one of `codes`, when given). */
export function expectKilnError(fn: () => unknown, codes?: readonly KilnErrorCode[]): KilnError {
  try {
    fn();
  } catch (error) {
    if (!(error instanceof KilnError)) {
      throw new Error(`expected a KilnError, got ${String(error)}`, { cause: error });
    }
    if (codes) expect(codes).toContain(error.code);
    return error;
  }
  throw new Error('expected a KilnError, but nothing was thrown');
}

/** Decoding must either succeed or throw a KilnError — never anything else. */
export function decodesOrKilnError(fn: () => unknown): void {
  try {
    fn();
  } catch (error) {
    if (!(error instanceof KilnError)) {
      throw new Error(`expected a KilnError, got ${String(error)}`, { cause: error });
    }
  }
}

/** A ~1M-element float32 tensor with non-trivial contents. */
export function largeTensor(name?: string): Tensor<'float32'> {
  const data = new Float32Array(1000 * 1000);
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i) * 1000;
  return new Tensor('float32', data, [1000, 1000], name);
}
