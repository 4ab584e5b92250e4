import { type DType, KilnError, KilnErrorCode } from '@kiln/core';

/** The element types a tfjs tensor holds (complex64 aside, which Kiln has no dtype for). */
export const TFJS_DTYPES = ['float32', 'int32', 'bool', 'string'] as const;
export type TfjsDType = (typeof TFJS_DTYPES)[number];

const HELD = new Set<string>(TFJS_DTYPES);

/** Advice for the Kiln dtypes tfjs cannot hold: what to cast them to before they reach the model. */
const CAST_ADVICE: Partial<Record<DType, string>> = {
  int8: 'int32',
  int16: 'int32',
  int64: 'int32',
  uint8: 'int32',
  uint16: 'int32',
  uint32: 'int32',
  uint64: 'int32',
  float16: 'float32',
  bfloat16: 'float32',
  float64: 'float32',
};

export function isTfjsDType(dtype: string): dtype is TfjsDType {
  return HELD.has(dtype);
}

/**
 * The tfjs dtype of a Kiln tensor going into a model. tfjs has no other element types, so
 * anything else is refused rather than cast silently (a cast could lose range or precision).
 */
export function toTfjsDType(dtype: DType, what: string): TfjsDType {
  if (isTfjsDType(dtype)) return dtype;
  const advice = CAST_ADVICE[dtype];
  throw new KilnError(
    KilnErrorCode.UnsupportedDType,
    `${what} is ${dtype}, which TensorFlow.js cannot hold (it holds ${TFJS_DTYPES.join(', ')})` +
      (advice ? `; cast it to ${advice} before it reaches the model` : ''),
  );
}

/** The Kiln dtype of a tfjs tensor or model signature entry coming out of tfjs. */
export function fromTfjsDType(dtype: string | undefined, what: string): DType {
  if (dtype !== undefined && isTfjsDType(dtype)) return dtype;
  throw new KilnError(
    KilnErrorCode.UnsupportedDType,
    `${what} is ${dtype ?? 'of unknown type'}, which Kiln cannot represent (it takes ${TFJS_DTYPES.join(', ')} from TensorFlow.js)`,
  );
}

/**
 * TensorFlow's DataType names (as graph models and SavedModel signatures spell them) mapped
 * exactly as tfjs-converter maps them (operation_mapper's parseDtypeParam).
 */
const TF_DATATYPES: Readonly<Record<string, string>> = {
  DT_FLOAT: 'float32',
  DT_HALF: 'float32',
  DT_DOUBLE: 'float32',
  DT_INT32: 'int32',
  DT_INT64: 'int32',
  DT_INT8: 'int32',
  DT_UINT8: 'int32',
  DT_BOOL: 'bool',
  DT_STRING: 'string',
  DT_COMPLEX64: 'complex64',
  DT_COMPLEX128: 'complex64',
};

/** The tfjs dtype a TensorFlow DataType name runs as; undefined for names tfjs cannot run. */
export function tfjsDTypeOfTfDataType(name: string | undefined): string | undefined {
  return name === undefined ? undefined : TF_DATATYPES[name];
}
