import { KilnError, KilnErrorCode } from '@kiln/core';

/**
 * A `bucketOf` for JobQueue that groups inputs by length: an input of length n joins the
 * bucket of the smallest boundary ≥ n, so a batch pads short inputs only to their bucket's
 * lengths, never to the longest input in the queue. Lengths above the last boundary share
 * the bucket `Infinity`.
 *
 * @example lengthBucketer([16, 32, 64, 128, 256, 512], (ids: number[]) => ids.length)
 */
export function lengthBucketer<I>(
  boundaries: readonly number[],
  lengthOf: (input: I) => number,
): (input: I) => number {
  if (boundaries.length === 0) {
    throw new KilnError(KilnErrorCode.InvalidConfig, 'length buckets need at least one boundary');
  }
  boundaries.forEach((bound, i) => {
    if (!Number.isSafeInteger(bound) || bound < 1 || (i > 0 && bound <= boundaries[i - 1]!)) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `length bucket boundaries must be increasing integers ≥ 1, got [${boundaries.join(', ')}]`,
      );
    }
  });
  const bounds = [...boundaries];
  return (input) => {
    const length = lengthOf(input);
    if (!Number.isSafeInteger(length) || length < 0) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input length must be an integer ≥ 0, got ${length}`,
      );
    }
    // Binary search for the first boundary ≥ length.
    let lo = 0;
    let hi = bounds.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (bounds[mid]! < length) lo = mid + 1;
      else hi = mid;
    }
    return lo < bounds.length ? bounds[lo]! : Infinity;
  };
}
