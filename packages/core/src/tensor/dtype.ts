import { KilnError, KilnErrorCode } from '../errors.js';

/** Every ONNX / Open Inference Protocol v2 element type. */
export const DTYPES = [
  'bool',
  'int8',
  'int16',
  'int32',
  'int64',
  'uint8',
  'uint16',
  'uint32',
  'uint64',
  'float16',
  'bfloat16',
  'float32',
  'float64',
  'string',
] as const;

export type DType = (typeof DTYPES)[number];
export type NumericDType = Exclude<DType, 'string'>;

/**
 * How each dtype is held in memory. float16 and bfloat16 keep their raw bits in a Uint16Array
 * (what onnxruntime-node and safetensors use); bool is one byte per element (0 or 1).
 */
export interface DTypeStorage {
  bool: Uint8Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  float16: Uint16Array;
  bfloat16: Uint16Array;
  float32: Float32Array;
  float64: Float64Array;
  string: string[];
}

export type TypedArray =
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array
  | Float32Array
  | Float64Array;

export type TensorData = TypedArray | string[];

/** The constructor of a view's kind (a Buffer's is Uint8Array's, as a structured clone makes it). */
export function typedArrayKind(view: TypedArray): TypedArrayCtor {
  return (globalThis as unknown as Record<string, TypedArrayCtor>)[view[Symbol.toStringTag]]!;
}

export type TypedArrayCtor = {
  new (length: number): TypedArray;
  new (buffer: ArrayBufferLike, byteOffset?: number, length?: number): TypedArray;
  readonly BYTES_PER_ELEMENT: number;
};

const CTORS: Record<NumericDType, TypedArrayCtor> = {
  bool: Uint8Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  float32: Float32Array,
  float64: Float64Array,
};

export function isDType(value: unknown): value is DType {
  return typeof value === 'string' && (DTYPES as readonly string[]).includes(value);
}

export function isNumericDType(dtype: DType): dtype is NumericDType {
  return dtype !== 'string';
}

export function typedArrayConstructor(dtype: NumericDType): TypedArrayCtor {
  return CTORS[dtype];
}

/** Bytes per element; 0 for string (variable length). */
export function bytesPerElement(dtype: DType): number {
  return dtype === 'string' ? 0 : CTORS[dtype].BYTES_PER_ELEMENT;
}

export function isBigIntDType(dtype: DType): dtype is 'int64' | 'uint64' {
  return dtype === 'int64' || dtype === 'uint64';
}

/** Allocates zeroed storage for `size` elements. */
export function allocate<D extends DType>(dtype: D, size: number): DTypeStorage[D] {
  if (dtype === 'string') return new Array<string>(size).fill('') as DTypeStorage[D];
  return new CTORS[dtype as NumericDType](size) as DTypeStorage[D];
}

/**
 * A zero-copy view of `bytes` as `dtype` elements. Copies only when the bytes are not
 * aligned for the element size, which views over arbitrary buffers cannot avoid.
 */
export function viewBytes(dtype: NumericDType, bytes: Uint8Array): TypedArray {
  const ctor = CTORS[dtype];
  const width = ctor.BYTES_PER_ELEMENT;
  if (bytes.byteLength % width !== 0) {
    throw new KilnError(
      KilnErrorCode.MalformedTensor,
      `${bytes.byteLength} bytes is not a whole number of ${dtype} elements (${width} bytes each)`,
    );
  }
  if (bytes.byteOffset % width === 0) {
    return new ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / width);
  }
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new ctor(copy.buffer, 0, bytes.byteLength / width);
}

/** The raw bytes of numeric storage, without copying. */
export function bytesOf(data: TypedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Does `data` have the storage type that `dtype` requires? */
export function storageMatches(dtype: DType, data: TensorData): boolean {
  if (dtype === 'string') return Array.isArray(data);
  return data instanceof CTORS[dtype];
}

/** Names used by external formats, for each dtype. */
interface DTypeNames {
  v2: string;
  onnx: number;
  djl: string;
  safetensors: string;
  /** numpy type string without byte order (`f4`); undefined for bfloat16, which numpy lacks. */
  numpy: string | undefined;
}

const NAMES: Record<DType, DTypeNames> = {
  bool: { v2: 'BOOL', onnx: 9, djl: 'BOOLEAN', safetensors: 'BOOL', numpy: 'b1' },
  int8: { v2: 'INT8', onnx: 3, djl: 'INT8', safetensors: 'I8', numpy: 'i1' },
  int16: { v2: 'INT16', onnx: 5, djl: 'INT16', safetensors: 'I16', numpy: 'i2' },
  int32: { v2: 'INT32', onnx: 6, djl: 'INT32', safetensors: 'I32', numpy: 'i4' },
  int64: { v2: 'INT64', onnx: 7, djl: 'INT64', safetensors: 'I64', numpy: 'i8' },
  uint8: { v2: 'UINT8', onnx: 2, djl: 'UINT8', safetensors: 'U8', numpy: 'u1' },
  uint16: { v2: 'UINT16', onnx: 4, djl: 'UINT16', safetensors: 'U16', numpy: 'u2' },
  uint32: { v2: 'UINT32', onnx: 12, djl: 'UINT32', safetensors: 'U32', numpy: 'u4' },
  uint64: { v2: 'UINT64', onnx: 13, djl: 'UINT64', safetensors: 'U64', numpy: 'u8' },
  float16: { v2: 'FP16', onnx: 10, djl: 'FLOAT16', safetensors: 'F16', numpy: 'f2' },
  bfloat16: { v2: 'BF16', onnx: 16, djl: 'BFLOAT16', safetensors: 'BF16', numpy: undefined },
  float32: { v2: 'FP32', onnx: 1, djl: 'FLOAT32', safetensors: 'F32', numpy: 'f4' },
  float64: { v2: 'FP64', onnx: 11, djl: 'FLOAT64', safetensors: 'F64', numpy: 'f8' },
  string: { v2: 'BYTES', onnx: 8, djl: 'STRING', safetensors: '', numpy: undefined },
};

export function dtypeNames(dtype: DType): Readonly<DTypeNames> {
  return NAMES[dtype];
}

function reverseLookup<K extends keyof DTypeNames>(
  key: K,
  value: DTypeNames[K],
): DType | undefined {
  for (const dtype of DTYPES) if (NAMES[dtype][key] === value) return dtype;
  return undefined;
}

function lookupOrThrow<K extends keyof DTypeNames>(
  key: K,
  value: DTypeNames[K],
  what: string,
): DType {
  const dtype = reverseLookup(key, value);
  if (dtype === undefined) {
    throw new KilnError(
      KilnErrorCode.UnsupportedDType,
      `unknown ${what} datatype ${JSON.stringify(value)}`,
    );
  }
  return dtype;
}

export const fromV2DType = (name: string): DType => lookupOrThrow('v2', name, 'v2 protocol');
export const fromOnnxDType = (code: number): DType => lookupOrThrow('onnx', code, 'ONNX');
/** DJL's Java names booleans BOOLEAN, its Python encoder (djl_python's np_util) BOOL. */
export const fromDjlDType = (name: string): DType =>
  lookupOrThrow('djl', name === 'BOOL' ? 'BOOLEAN' : name, 'DJL');
export const fromSafetensorsDType = (name: string): DType =>
  lookupOrThrow('safetensors', name, 'safetensors');
