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

/**
 * Moves `bytes` down inside their own buffer to the nearest offset aligned for `width`-byte
 * elements, so that a typed view of them needs no copy; the bytes they move over, which must
 * be at or above `floor` (an offset into the buffer), are overwritten. Answers `bytes` as they
 * are when already aligned or when there is no room above `floor` (a view then copies). Only
 * for buffers the caller owns, whose bytes below the data it has finished reading.
 */
export function alignDownInPlace(bytes: Uint8Array, width: number, floor: number): Uint8Array {
  const past = bytes.byteOffset % width;
  const target = bytes.byteOffset - past;
  if (past === 0 || target < floor) return bytes;
  const whole = new Uint8Array(bytes.buffer);
  whole.copyWithin(target, bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return whole.subarray(target, target + bytes.byteLength);
}
