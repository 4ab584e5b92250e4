import { KilnError, KilnErrorCode } from '../errors.js';

export type Shape = readonly number[];

/** Number of elements of a concrete shape; a 0-d shape holds one element. */
export function shapeSize(shape: Shape): number {
  let size = 1;
  for (const dim of shape) size *= dim;
  return size;
}

export function assertConcreteShape(shape: Shape, what = 'shape'): void {
  for (const dim of shape) {
    if (!Number.isSafeInteger(dim) || dim < 0) {
      throw new KilnError(
        KilnErrorCode.MalformedTensor,
        `${what} [${shape.join(', ')}] has an invalid dimension ${dim}`,
      );
    }
  }
}

export function shapesEqual(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((dim, i) => dim === b[i]);
}

/** Does a concrete shape fit a declared one, where -1 (or any negative) means dynamic? */
export function shapeMatches(declared: Shape, actual: Shape): boolean {
  return (
    declared.length === actual.length && declared.every((dim, i) => dim < 0 || dim === actual[i])
  );
}

export function formatShape(shape: Shape): string {
  return `[${shape.join(',')}]`;
}
