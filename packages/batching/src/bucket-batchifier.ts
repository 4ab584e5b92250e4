import type { AnyTensor, Batch, Batchifier, NDList } from '@kiln/core';
import { lengthBucketer } from './length-bucketer.js';
import { PadBatchifier, type PadBatchifierOptions } from './pad-batchifier.js';

export interface BucketBatchifierOptions extends PadBatchifierOptions {
  /** Upper bounds of the length buckets (see lengthBucketer). */
  readonly boundaries: readonly number[];
  /** Tensor whose length picks the bucket; default the first. */
  readonly bucketBy?: string;
  /** Axis of that tensor holding its length; default 1. */
  readonly lengthAxis?: number;
}

/**
 * Pads like PadBatchifier, but only inputs whose lengths fall in one bucket share a batch: a
 * short input is never padded past its bucket's bound for a long one. A queue that buckets
 * requests itself (JobQueue's `bucketOf`) hands it batches of one bucket already; this keeps
 * the rule where it could not (request formats whose length the queue cannot read).
 */
export class BucketBatchifier implements Batchifier {
  readonly name = 'bucket';
  private readonly pad: PadBatchifier;
  private readonly bucketOf: (list: NDList) => number;

  constructor(private readonly options: BucketBatchifierOptions) {
    this.pad = new PadBatchifier(options);
    const axis = options.lengthAxis ?? 1;
    this.bucketOf = lengthBucketer(options.boundaries, (list: NDList) => {
      const tensor = this.lengthTensor(list);
      // An input without that axis counts as length 0; the padding rules refuse to join it.
      return tensor !== undefined && tensor.rank > axis ? tensor.shape[axis]! : 0;
    });
  }

  canBatch(inputs: readonly NDList[]): boolean {
    if (inputs.length === 0) return false;
    const bucket = this.bucketOf(inputs[0]!);
    return inputs.every((list) => this.bucketOf(list) === bucket) && this.pad.canBatch(inputs);
  }

  batchify(inputs: readonly NDList[]): Batch {
    return this.pad.batchify(inputs);
  }

  private lengthTensor(list: NDList): AnyTensor | undefined {
    const name = this.options.bucketBy;
    return name === undefined ? list.tensors[0] : list.tensors.find((t) => t.name === name);
  }
}
