import { describe, expect, it } from 'vitest';
import {
  NDList,
  StackBatchifier,
  Tensor,
  encodeNpy,
  encodeNpz,
  sequenceBatchingFrom,
} from '@kiln/core';
import { BucketBatchifier } from './bucket-batchifier.js';
import { PadBatchifier } from './pad-batchifier.js';
import { batchifierFor, servingBucketOf } from './serving-batching.js';

const ids = (n: number, name = 'ids') =>
  new Tensor(
    'float32',
    Float32Array.from({ length: n }, (_, i) => i + 1),
    [1, n],
    name,
  );

describe('batchifiers from serving.properties', () => {
  it('builds the named batchifier', () => {
    const of = (batchifier: string) => batchifierFor(sequenceBatchingFrom({ batchifier })!);
    expect(of('stack')).toBeInstanceOf(StackBatchifier);
    expect(of('padding')).toBeInstanceOf(PadBatchifier);
    expect(of('bucket')).toBeInstanceOf(BucketBatchifier);
    expect(of('none')).toBeNull();
  });

  it('lets only one bucket share a padded batch, and cuts the padding off again', () => {
    const bucket = new BucketBatchifier({ boundaries: [4, 8] });
    const [a, b, c] = [ids(2), ids(4), ids(7)].map((t) => NDList.of(t));
    expect(bucket.canBatch([a!, b!])).toBe(true);
    expect(bucket.canBatch([a!, c!])).toBe(false);
    const batch = bucket.batchify([a!, b!]);
    expect(batch.input.tensors[0]!.shape).toEqual([2, 4]);
    const [first] = batch.unbatchify(batch.input);
    expect([...first!.tensors[0]!.data]).toEqual([1, 2]);
  });
});

describe('servingBucketOf', () => {
  const bucketOf = servingBucketOf(
    sequenceBatchingFrom({ batchifier: 'bucket', bucket_boundaries: '4,8', bucket_by: 'ids' })!,
  )!;

  it('reads lengths from carried tensors, .npy and stored .npz bodies, .npy parts', () => {
    expect(bucketOf({ tensors: NDList.of(ids(3)) })).toBe(4);
    expect(bucketOf({ body: encodeNpy(ids(6)) })).toBe(8);
    expect(bucketOf({ body: encodeNpz(NDList.of(ids(2, 'mask'), ids(9))) })).toBe(Infinity);
    expect(
      bucketOf({ parts: [{ name: 'ids', data: encodeNpy(ids(5)), contentType: undefined }] }),
    ).toBe(8);
  });

  it('leaves requests it cannot read cheaply in one bucket of their own', () => {
    expect(bucketOf({ body: new TextEncoder().encode('[[1, 2, 3]]') })).toBeUndefined();
    expect(
      bucketOf({
        body: encodeNpy(ids(3)),
        v2: { headerLength: undefined, model: 'm', version: '' },
      }),
    ).toBeUndefined();
  });

  it('is only for batchifier=bucket', () => {
    expect(servingBucketOf(sequenceBatchingFrom({ batchifier: 'pad' })!)).toBeUndefined();
  });
});
