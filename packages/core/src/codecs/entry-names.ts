import { KilnError, KilnErrorCode } from '../errors.js';
import type { NDList } from '../tensor/ndlist.js';

/**
 * Names for formats that require one per tensor: the tensor's own, else numpy's `arr_0`,
 * `arr_1`… counted over the unnamed tensors (what `numpy.savez(*arrays)` writes).
 */
export function entryNames(list: NDList, format: string): string[] {
  let unnamed = 0;
  const names = list.tensors.map((tensor) => tensor.name ?? `arr_${unnamed++}`);
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `${format}: two tensors are named ${JSON.stringify(name)}; names must be unique`,
      );
    }
    seen.add(name);
  }
  return names;
}
