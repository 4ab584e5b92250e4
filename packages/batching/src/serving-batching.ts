import {
  type Batchifier,
  type SequenceBatching,
  type ServingInput,
  StackBatchifier,
  npyShape,
  npzShape,
} from '@kiln/core';
import { BucketBatchifier } from './bucket-batchifier.js';
import type { BucketKey } from './job.js';
import { lengthBucketer } from './length-bucketer.js';
import { PadBatchifier } from './pad-batchifier.js';

/** The batchifier serving.properties asks for (`batchifier=…`); null runs inputs one by one. */
export function batchifierFor(settings: SequenceBatching): Batchifier | null {
  const pad = {
    padValue: settings.padValue,
    ...(settings.padAxes ? { axes: settings.padAxes } : {}),
  };
  switch (settings.batchifier) {
    case 'none':
      return null;
    case 'stack':
      return new StackBatchifier();
    case 'pad':
      return new PadBatchifier(pad);
    case 'bucket':
      return new BucketBatchifier({
        ...pad,
        boundaries: settings.bucketBoundaries!,
        lengthAxis: settings.lengthAxis,
        ...(settings.bucketBy === undefined ? {} : { bucketBy: settings.bucketBy }),
      });
  }
}

/**
 * A queue's `bucketOf` for `batchifier=bucket`: a request's length bucket, read where that is
 * cheap on the calling thread — tensors it already carries, the headers of a .npy body, of a
 * stored .npz body (numpy.savez) or of .npy parts of a multipart request. Other requests
 * (JSON, compressed npz, ndlist, v2 bodies) share the bucket
 * `undefined`; the worker's BucketBatchifier still splits their batches by bucket.
 */
export function servingBucketOf(
  settings: SequenceBatching,
): ((input: ServingInput) => BucketKey | undefined) | undefined {
  const boundaries = settings.bucketBoundaries;
  if (settings.batchifier !== 'bucket' || boundaries === undefined) return undefined;
  const bucket = lengthBucketer(boundaries, (length: number) => length);
  const axis = settings.lengthAxis;
  const lengthOf = (shape: readonly number[] | undefined) =>
    shape !== undefined && shape.length > axis ? shape[axis] : undefined;
  const name = settings.bucketBy;
  return (input) => {
    let length: number | undefined;
    if (input.tensors) {
      const tensor =
        (name === undefined ? undefined : input.tensors.tensors.find((t) => t.name === name)) ??
        input.tensors.tensors[0];
      length = lengthOf(tensor?.shape);
    } else if (input.parts) {
      const part =
        (name === undefined ? undefined : input.parts.find((p) => p.name === name)) ??
        input.parts[0];
      length = part && lengthOf(npyShape(part.data));
    } else if (input.body && !input.v2) {
      const zip = input.body[0] === 0x50 && input.body[1] === 0x4b; // PK: an .npz archive
      length = lengthOf(zip ? npzShape(input.body, name) : npyShape(input.body));
    }
    return length === undefined ? undefined : bucket(length);
  };
}
