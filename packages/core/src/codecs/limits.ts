import { KilnError, KilnErrorCode } from '../errors.js';
import type { Shape } from '../tensor/shape.js';

/** Most dimensions a decoded tensor may have (numpy's own limit). */
export const MAX_RANK = 64;

/** Most elements a decoded tensor may have, whatever its element size. */
export const MAX_ELEMENTS = 2 ** 32;

/** Default bound on the decoded size of a compressed body (npz). */
export const DEFAULT_MAX_DECODED_BYTES = 1024 * 1024 * 1024;

export function malformed(format: string, message: string): KilnError {
  return new KilnError(KilnErrorCode.MalformedTensor, `${format}: ${message}`);
}

export function unsupportedDType(format: string, message: string): KilnError {
  return new KilnError(KilnErrorCode.UnsupportedDType, `${format}: ${message}`);
}

/**
 * Validates dimensions read from untrusted input and returns the element count. Rejects
 * anything that is not a list of non-negative safe integers, too many dimensions, and counts
 * over MAX_ELEMENTS, so that no later allocation can be driven by a lying header.
 */
export function checkedShape(
  dims: readonly unknown[],
  format: string,
): { shape: Shape; size: number } {
  if (dims.length > MAX_RANK) {
    throw malformed(format, `${dims.length} dimensions is more than the ${MAX_RANK} allowed`);
  }
  const shape: number[] = [];
  for (const dim of dims) {
    if (typeof dim !== 'number' || !Number.isSafeInteger(dim) || dim < 0) {
      throw malformed(format, `invalid dimension ${String(dim)}`);
    }
    shape.push(dim);
  }
  if (shape.includes(0)) return { shape, size: 0 };
  let size = 1;
  for (const dim of shape) {
    size *= dim;
    if (size > MAX_ELEMENTS) {
      throw malformed(format, `shape [${shape.join(', ')}] has more than ${MAX_ELEMENTS} elements`);
    }
  }
  return { shape, size };
}
