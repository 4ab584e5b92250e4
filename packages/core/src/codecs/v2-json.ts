import {
  type DType,
  type DTypeStorage,
  type TypedArray,
  allocate,
  dtypeNames,
  fromV2DType,
  isBigIntDType,
} from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import type { Shape } from '../tensor/shape.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { entryNames } from './entry-names.js';
import { fromBfloat16Bits, fromFloat16Bits, toBfloat16Bits, toFloat16Bits } from './float16.js';
import { MAX_RANK, checkedShape, malformed } from './limits.js';

const FORMAT = 'v2';

/** One tensor of the Open Inference Protocol (KServe v2) JSON encoding. */
export interface V2Tensor {
  name: string;
  shape: number[];
  datatype: string;
  parameters?: Record<string, unknown>;
  data: unknown[];
}

const INTEGER_RANGES: Partial<Record<DType, readonly [number, number]>> = {
  int8: [-0x80, 0x7f],
  int16: [-0x8000, 0x7fff],
  int32: [-0x80000000, 0x7fffffff],
  uint8: [0, 0xff],
  uint16: [0, 0xffff],
  uint32: [0, 0xffffffff],
};

const BIGINT_RANGES = {
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
} as const;

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** JSON has no NaN or infinities; they travel as these strings, both ways. */
const NON_FINITE: Readonly<Record<string, number>> = {
  NaN: Number.NaN,
  Infinity: Number.POSITIVE_INFINITY,
  '-Infinity': Number.NEGATIVE_INFINITY,
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Decodes one v2 tensor object; `data` may be flat or nested to match `shape`. */
export function decodeV2Tensor(value: unknown): AnyTensor {
  if (!isObject(value)) throw malformed(FORMAT, 'a tensor must be a JSON object');
  const { name, shape: dims, datatype, parameters, data } = value;
  if (typeof name !== 'string') throw malformed(FORMAT, 'a tensor needs a string "name"');
  const where = `tensor ${JSON.stringify(name)}`;
  if (typeof datatype !== 'string') throw malformed(FORMAT, `${where} needs a string "datatype"`);
  if (!Array.isArray(dims)) throw malformed(FORMAT, `${where} needs a "shape" array`);
  if (parameters !== undefined && !isObject(parameters)) {
    throw malformed(FORMAT, `${where} has non-object "parameters"`);
  }
  const dtype = fromV2DType(datatype);
  const { shape, size } = checkedShape(dims, `${FORMAT} ${where}`);
  const flat = flatten(data, shape, size, where);
  return new Tensor<DType>(dtype, convert(dtype, flat, where), shape, name);
}

/** Row-major elements of flat or fully nested `data`, checked against the shape. */
function flatten(
  data: unknown,
  shape: Shape,
  size: number,
  where: string,
  format = FORMAT,
): readonly unknown[] {
  if (!Array.isArray(data)) {
    if (shape.length === 0 && data !== undefined) return [data];
    throw malformed(format, `${where} needs a "data" array`);
  }
  if (!data.some(Array.isArray)) {
    if (data.length !== size) {
      throw malformed(
        format,
        `${where} has ${data.length} elements, shape [${shape.join(', ')}] needs ${size}`,
      );
    }
    return data;
  }
  const out: unknown[] = [];
  const walk = (value: unknown, depth: number): void => {
    if (depth === shape.length) {
      if (Array.isArray(value)) {
        throw malformed(format, `${where} data nests deeper than its shape`);
      }
      out.push(value);
      return;
    }
    if (!Array.isArray(value) || value.length !== shape[depth]) {
      throw malformed(
        format,
        `${where} data does not match shape [${shape.join(', ')}] at depth ${depth}`,
      );
    }
    for (const item of value) walk(item, depth + 1);
  };
  walk(data, 0);
  return out;
}

function convert(dtype: DType, flat: readonly unknown[], where: string): DTypeStorage[DType] {
  const out = allocate(dtype, flat.length);
  const bad = (index: number, expected: string) =>
    malformed(
      FORMAT,
      `${where} element ${index} is ${JSON.stringify(flat[index]) ?? 'undefined'}, expected ${expected}`,
    );
  if (dtype === 'string') {
    const strings = out as string[];
    flat.forEach((value, i) => {
      if (typeof value !== 'string') throw bad(i, 'a string');
      strings[i] = value;
    });
  } else if (dtype === 'bool') {
    const bytes = out as Uint8Array;
    flat.forEach((value, i) => {
      if (typeof value !== 'boolean') throw bad(i, 'true or false');
      bytes[i] = value ? 1 : 0;
    });
  } else if (isBigIntDType(dtype)) {
    const [min, max] = BIGINT_RANGES[dtype];
    const target = out as BigInt64Array | BigUint64Array;
    flat.forEach((value, i) => {
      const big = toBigInt(value);
      if (big === undefined || big < min || big > max) throw bad(i, `an integer in ${dtype} range`);
      target[i] = big;
    });
  } else if (INTEGER_RANGES[dtype]) {
    const [min, max] = INTEGER_RANGES[dtype];
    const target = out as TypedArray as Int32Array;
    flat.forEach((value, i) => {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
        throw bad(i, `an integer in ${dtype} range`);
      }
      target[i] = value;
    });
  } else {
    const toStorage =
      dtype === 'float16' ? toFloat16Bits : dtype === 'bfloat16' ? toBfloat16Bits : Number;
    const target = out as TypedArray as Float64Array;
    flat.forEach((value, i) => {
      const number = typeof value === 'string' ? NON_FINITE[value] : value;
      if (typeof number !== 'number') throw bad(i, 'a number');
      target[i] = toStorage(number);
    });
  }
  return out;
}

/** 64-bit integers arrive as safe-integer numbers or as decimal strings (for larger values). */
function toBigInt(value: unknown): bigint | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  if (typeof value === 'string' && /^-?\d{1,20}$/.test(value)) return BigInt(value);
  return undefined;
}

/** Encodes a tensor with flat data: 64-bit integers as numbers when safe, else strings. */
export function encodeV2Tensor(tensor: AnyTensor, name = tensor.name ?? 'arr_0'): V2Tensor {
  return {
    name,
    shape: [...tensor.shape],
    datatype: dtypeNames(tensor.dtype).v2,
    data: jsonElements(tensor),
  };
}

function jsonElements(tensor: AnyTensor): unknown[] {
  const { dtype } = tensor;
  if (dtype === 'string') return [...(tensor.data as string[])];
  if (dtype === 'bool') return Array.from(tensor.data as Uint8Array, (byte) => byte !== 0);
  if (isBigIntDType(dtype)) {
    return Array.from(tensor.data as BigInt64Array | BigUint64Array, (value) =>
      value >= MIN_SAFE && value <= MAX_SAFE ? Number(value) : value.toString(),
    );
  }
  const fromStorage =
    dtype === 'float16' ? fromFloat16Bits : dtype === 'bfloat16' ? fromBfloat16Bits : Number;
  return Array.from(tensor.data as ArrayLike<number>, (value) => {
    const number = fromStorage(value);
    return Number.isFinite(number) ? number : String(number);
  });
}

/** v2 tensors for a JSON reply; unnamed tensors are called `arr_0`, `arr_1`… */
export function encodeJsonTensors(list: NDList): V2Tensor[] {
  const names = entryNames(list, 'json');
  return list.tensors.map((tensor, i) => encodeV2Tensor(tensor, names[i]));
}

/**
 * Tensors from a simple JSON body: a v2 request (`{"inputs": [...]}`), an array of v2 tensors,
 * or a plain (nested) array of numbers, which becomes one float32 tensor of the inferred shape.
 */
export function decodeJsonTensors(value: unknown): NDList {
  if (isObject(value)) {
    if (!Array.isArray(value.inputs)) {
      throw malformed('json', 'a JSON object body needs an "inputs" array');
    }
    return new NDList(value.inputs.map(decodeV2Tensor));
  }
  // `[]` is read as an empty list of tensors, which is what an empty reply encodes to.
  if (Array.isArray(value) && value.every(isObject)) return new NDList(value.map(decodeV2Tensor));
  if (Array.isArray(value) || typeof value === 'number') return NDList.of(plainArrayTensor(value));
  throw malformed('json', 'body is neither v2 tensors nor an array of numbers');
}

function plainArrayTensor(value: unknown): AnyTensor {
  const dims: number[] = [];
  for (let probe = value; Array.isArray(probe); probe = probe[0]) {
    if (dims.length === MAX_RANK) {
      throw malformed('json', `array nests deeper than ${MAX_RANK} levels`);
    }
    dims.push(probe.length);
  }
  const { shape, size } = checkedShape(dims, 'json');
  const flat = flatten(value, shape, size, 'array', 'json');
  const data = new Float32Array(flat.length);
  flat.forEach((item, i) => {
    if (typeof item !== 'number') throw malformed('json', `array element ${i} is not a number`);
    data[i] = item;
  });
  return new Tensor('float32', data, shape);
}
