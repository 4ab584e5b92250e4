import { describe, expect, it } from 'vitest';
import {
  NDList,
  StackBatchifier,
  Tensor,
  encodeNpy,
  encodeNpz,
  npyLayout,
  sequenceBatchingFrom,
} from '@kiln/core';
import { BucketBatchifier } from './bucket-batchifier.js';
import { PadBatchifier } from './pad-batchifier.js';
import {
  batchifierFor,
  declaredLayout,
  servingBatchKeyOf,
  servingBucketOf,
} from './serving-batching.js';

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

/** A binary v2 request: its JSON header, then the tensors' bytes. */
function v2Request(inputs: unknown[], headerLength?: number) {
  const header = new TextEncoder().encode(JSON.stringify({ inputs }));
  const body = new Uint8Array(header.length + 64);
  body.set(header);
  return {
    body,
    v2: { headerLength: String(headerLength ?? header.length), model: 'm', version: '' },
  };
}

describe('servingBatchKeyOf', () => {
  const stack = servingBatchKeyOf(undefined)!;
  const x = (shape: number[], datatype = 'FP32') => ({ name: 'x', datatype, shape });

  it('keys requests by what must match to stack: name, dtype and every axis but the batch axis', () => {
    const npy = (n: number, rows = 1) =>
      stack({ body: encodeNpy(new Tensor('float32', new Float32Array(rows * n), [rows, n])) });
    expect(npy(4)).toBe(npy(4, 3));
    expect(npy(4)).not.toBe(npy(5));
    expect(stack(v2Request([x([1, 4])]))).toBe(stack(v2Request([x([8, 4])])));
    expect(stack(v2Request([x([1, 4])]))).not.toBe(stack(v2Request([x([1, 4], 'INT64')])));
    // The same tensor declared by .npy parts, carried tensors and a v2 header: one key.
    const carried = stack({ tensors: NDList.of(ids(4, 'x')) });
    expect(carried).toBe(stack(v2Request([x([2, 4])])));
    expect(stack({ parts: [{ name: 'x', data: encodeNpy(ids(4)), contentType: undefined }] })).toBe(
      carried,
    );
  });

  it('keys a repeated header from its bytes, and a changed one anew', () => {
    const key = servingBatchKeyOf(undefined)!;
    const npy = (n: number, fill = 0) =>
      encodeNpy(new Tensor('float32', new Float32Array(n).fill(fill), [1, n]));
    const [four, five] = [key({ body: npy(4) }), key({ body: npy(5) })];
    expect(four).not.toBe(five);
    // The same header with other data, and alternating headers: each keyed as its own.
    expect(key({ body: npy(4, 7) })).toBe(four);
    expect(key({ body: npy(5, 1) })).toBe(five);
    expect(key({ body: npy(4, 2) })).toBe(four);
    const [a, b] = [v2Request([x([1, 4])]), v2Request([x([1, 4], 'INT64')])];
    expect(key(a)).not.toBe(key(b));
    expect(key(v2Request([x([1, 4])]))).toBe(key(a));
  });

  it('leaves padded axes out under batchifier=pad, and keys by length bucket under bucket', () => {
    const pad = servingBatchKeyOf(sequenceBatchingFrom({ batchifier: 'pad' })!)!;
    expect(pad({ tensors: NDList.of(ids(3)) })).toBe(pad({ tensors: NDList.of(ids(30)) }));
    const bucket = servingBatchKeyOf(
      sequenceBatchingFrom({ batchifier: 'bucket', bucket_boundaries: '4,8' })!,
    )!;
    expect(bucket({ tensors: NDList.of(ids(3)) })).toBe(4);
    expect(servingBatchKeyOf(sequenceBatchingFrom({ batchifier: 'none' })!)).toBeUndefined();
  });

  it('leaves headers past 4 KiB to the worker: no parse of a hostile one on this thread', () => {
    const long = 'x'.repeat(5000);
    // A .npy header padded past the bound (a valid header with a long trailing run of spaces).
    const header = `{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }${' '.repeat(5000)}\n`;
    const padded = new Uint8Array(10 + header.length + 16);
    padded.set([0x93, ...new TextEncoder().encode('NUMPY'), 1, 0]);
    new DataView(padded.buffer).setUint16(8, header.length, true);
    padded.set(new TextEncoder().encode(header), 10);
    // A valid file, which the codec itself reads (as the worker will).
    expect(npyLayout(padded)).toEqual({ dtype: 'float32', shape: [1, 4] });
    expect(declaredLayout({ body: padded })).toBeUndefined();
    expect(declaredLayout(v2Request([{ ...x([1, 4]), name: long }]))).toBeUndefined();
  });

  it('declares nothing for what it cannot read cheaply or what does not parse', () => {
    const text = new TextEncoder();
    expect(declaredLayout({ body: text.encode('[[1, 2, 3]]') })).toBeUndefined();
    expect(declaredLayout({ body: new Uint8Array([0xff, 0xd8, 0xff]) })).toBeUndefined();
    // v2: all JSON, a gRPC message, a header length past the body, a header that is no v2.
    expect(
      declaredLayout({
        body: text.encode('{}'),
        v2: { headerLength: undefined, model: 'm', version: '' },
      }),
    ).toBeUndefined();
    const grpc = v2Request([x([1, 4])]);
    expect(declaredLayout({ ...grpc, v2: { ...grpc.v2, grpc: true } })).toBeUndefined();
    expect(declaredLayout(v2Request([x([1, 4])], 10_000))).toBeUndefined();
    expect(declaredLayout(v2Request([x([1, 4])], 3))).toBeUndefined();
    expect(
      declaredLayout(v2Request([{ name: 'x', datatype: 'FP99', shape: [1] }])),
    ).toBeUndefined();
    expect(
      declaredLayout(v2Request([{ name: 'x', datatype: 'FP32', shape: [-1] }])),
    ).toBeUndefined();
    expect(declaredLayout(v2Request([x([1, 4])]))).toEqual([
      { name: 'x', dtype: 'float32', shape: [1, 4] },
    ]);
  });
});
