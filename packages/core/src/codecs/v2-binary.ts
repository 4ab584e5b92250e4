import { type DType, fromV2DType, isDType } from '../tensor/dtype.js';
import type { Shape } from '../tensor/shape.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { ByteReader } from './byte-reader.js';
import { checkedShape, malformed } from './limits.js';
import { tensorFromRaw } from './raw-data.js';

// One tensor's bytes in the v2 binary-data extension: numeric data raw and little-endian;
// BYTES elements each as a 4-byte little-endian length and then the bytes (here UTF-8 text).

const FORMAT = 'v2 binary';
const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** The tensor's binary-data bytes; numeric data is returned as a view, not a copy. */
export function encodeBinaryTensor(tensor: AnyTensor): Uint8Array {
  if (tensor.dtype !== 'string') return tensor.bytes();
  const encoded = (tensor.data as string[]).map((text) => encoder.encode(text));
  const out = new Uint8Array(encoded.reduce((sum, bytes) => sum + 4 + bytes.byteLength, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const bytes of encoded) {
    view.setUint32(at, bytes.byteLength, true);
    out.set(bytes, at + 4);
    at += 4 + bytes.byteLength;
  }
  return out;
}

/**
 * Decodes one tensor's binary data. `datatype` is a v2 name (`FP32`) or a Kiln dtype
 * (`float32`). Numeric data is viewed in place when aligned; sizes must match exactly.
 */
export function decodeBinaryTensor(
  datatype: string,
  shape: Shape,
  bytes: Uint8Array,
  name?: string,
): AnyTensor {
  const dtype: DType = isDType(datatype) ? datatype : fromV2DType(datatype);
  const checked = checkedShape(shape, FORMAT);
  if (dtype !== 'string') {
    return tensorFromRaw(FORMAT, dtype, bytes, checked.shape, checked.size, name);
  }
  if (checked.size * 4 > bytes.byteLength) {
    throw malformed(
      FORMAT,
      `${checked.size} BYTES elements cannot fit in ${bytes.byteLength} bytes`,
    );
  }
  const reader = new ByteReader(bytes, FORMAT);
  const strings = new Array<string>(checked.size);
  for (let i = 0; i < checked.size; i++) {
    const element = reader.take(reader.u32('element length', true), `element ${i}`);
    try {
      strings[i] = utf8.decode(element);
    } catch {
      throw malformed(FORMAT, `BYTES element ${i} is not UTF-8 text`);
    }
  }
  if (reader.remaining !== 0) {
    throw malformed(FORMAT, `${reader.remaining} bytes follow the last element`);
  }
  return new Tensor('string', strings, checked.shape, name);
}
