import { type DType, type TypedArray, bytesOf, dtypeNames } from '@kiln/core';
import type { OnnxTypes } from './onnx-proto.js';

/** Values for an initializer: typed storage matching the dtype, or strings for `string`. */
export type InitializerData = TypedArray | readonly string[];

/** A TensorProto holding `data` (numeric data as little-endian raw bytes). */
export function toTensorProto(
  name: string,
  dtype: DType,
  dims: readonly number[],
  data: InitializerData,
): OnnxTypes.ITensorProto {
  const expected = dims.reduce((a, b) => a * b, 1);
  if (data.length !== expected) {
    throw new Error(
      `initializer ${name}: dims [${dims.join(', ')}] need ${expected} values, got ${data.length}`,
    );
  }
  const base = { name, dataType: dtypeNames(dtype).onnx, dims: [...dims] };
  if (dtype === 'string') {
    const encoder = new TextEncoder();
    return { ...base, stringData: (data as readonly string[]).map((s) => encoder.encode(s)) };
  }
  // Copy, so the proto never aliases (and outlives) a caller's larger buffer.
  return { ...base, rawData: bytesOf(data as TypedArray).slice() };
}
