import { type AnyTensor, type DType, type DTypeStorage, Tensor, type TypedArray } from '@kiln/core';
import type { TfApi, TfTensor } from '../runtime/tfjs-api.js';
import { type TfjsDType, fromTfjsDType } from './dtypes.js';

/**
 * A tfjs tensor over a Kiln tensor's data. Kiln's storage for float32, int32, bool (one byte
 * per element) and string is what tfjs takes, so no element is converted.
 */
export function toTfTensor(tf: TfApi, tensor: AnyTensor, dtype: TfjsDType): TfTensor {
  const values = tensor.data as Float32Array | Int32Array | Uint8Array | string[];
  return tf.tensor(values, [...tensor.shape], dtype);
}

/**
 * A Kiln tensor holding a tfjs tensor's values. The data always belongs to the result:
 * `sharesStorage` says the backend hands out its own arrays (the cpu backend), which are then
 * copied so that a caller can neither change nor move a buffer tfjs still uses.
 */
export function fromTfTensor(tensor: TfTensor, name: string, sharesStorage: boolean): AnyTensor {
  const dtype: DType = fromTfjsDType(tensor.dtype, `output ${name}`);
  const values = tensor.dataSync() as TypedArray | string[];
  const data = sharesStorage && !Array.isArray(values) ? values.slice() : values;
  return new Tensor(dtype, data as DTypeStorage[DType], tensor.shape, name);
}
