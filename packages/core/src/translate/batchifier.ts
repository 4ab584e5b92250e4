import type { NDList } from '../tensor/ndlist.js';

/** A batch built from several inputs, able to split the model's batched output again. */
export interface Batch {
  readonly input: NDList;
  /** Splits the batched output into one NDList per original input, in order. */
  unbatchify(output: NDList): NDList[];
}

/**
 * Turns several NDLists into one batched NDList and back. `batchify` throws a KilnError when
 * the inputs cannot share one batch; callers then split the batch, never fail it.
 */
export interface Batchifier {
  readonly name: string;
  /** Whether these inputs can form one batch; cheap, no data is copied. */
  canBatch(inputs: readonly NDList[]): boolean;
  batchify(inputs: readonly NDList[]): Batch;
}
