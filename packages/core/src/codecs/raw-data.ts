import {
  type DTypeStorage,
  type NumericDType,
  bytesPerElement,
  viewBytes,
} from '../tensor/dtype.js';
import type { Shape } from '../tensor/shape.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { malformed } from './limits.js';

/** A copy of `bytes` with every `width`-byte element reversed (big- ↔ little-endian). */
export function swapByteOrder(bytes: Uint8Array, width: number): Uint8Array {
  const out = new Uint8Array(bytes.byteLength);
  for (let start = 0; start < bytes.byteLength; start += width) {
    for (let i = 0; i < width; i++) out[start + i] = bytes[start + width - 1 - i]!;
  }
  return out;
}

/** Bool storage must hold 0 or 1; foreign writers may use any non-zero byte for true. */
function normalizedBool(bytes: Uint8Array): Uint8Array {
  if (bytes.every((byte) => byte <= 1)) return bytes;
  return bytes.map((byte) => (byte === 0 ? 0 : 1));
}

/**
 * A numeric tensor over raw element bytes. Little-endian data is viewed without copying when
 * aligned; big-endian data is swapped into a copy. The byte count must match the shape exactly.
 */
export function tensorFromRaw(
  format: string,
  dtype: NumericDType,
  raw: Uint8Array,
  shape: Shape,
  size: number,
  name: string | undefined,
  littleEndian = true,
): AnyTensor {
  const width = bytesPerElement(dtype);
  if (raw.byteLength !== size * width) {
    throw malformed(
      format,
      `${dtype} tensor of shape [${shape.join(', ')}] needs ${size * width} bytes, got ${raw.byteLength}`,
    );
  }
  const ordered = littleEndian || width === 1 ? raw : swapByteOrder(raw, width);
  const bytes = dtype === 'bool' ? normalizedBool(ordered) : ordered;
  return new Tensor(dtype, viewBytes(dtype, bytes) as DTypeStorage[typeof dtype], shape, name);
}
