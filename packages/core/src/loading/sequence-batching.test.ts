import { describe, expect, it } from 'vitest';
import { encodeNpy, encodeNpz, npyShape, npzShape } from '../codecs/index.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { checkModelSettings } from './model-settings.js';
import { sequenceBatchingFrom } from './sequence-batching.js';
import { servingPropertiesFrom } from './serving-properties.js';

describe('sequenceBatchingFrom', () => {
  it('leaves the translator alone without batchifier', () => {
    expect(sequenceBatchingFrom({ batch_size: '8' })).toBeUndefined();
  });

  it('reads pad, DJL padding and bucket with their keys', () => {
    expect(sequenceBatchingFrom({ batchifier: 'padding' })).toEqual({
      batchifier: 'pad',
      padValue: 0,
      padAxes: undefined,
      bucketBoundaries: undefined,
      bucketBy: undefined,
      lengthAxis: 1,
    });
    expect(
      sequenceBatchingFrom({
        batchifier: 'Bucket',
        pad_value: 'input_ids:0, token_type_ids:1',
        pad_axes: '2',
        bucket_boundaries: '16, 32,64',
        bucket_by: 'input_ids',
      }),
    ).toEqual({
      batchifier: 'bucket',
      padValue: { input_ids: 0, token_type_ids: 1 },
      padAxes: [2],
      bucketBoundaries: [16, 32, 64],
      bucketBy: 'input_ids',
      lengthAxis: 2,
    });
    expect(sequenceBatchingFrom({ batchifier: 'bucket' })?.bucketBoundaries).toEqual([
      16, 32, 64, 128, 256, 512,
    ]);
  });

  it('refuses bad values and keys the batchifier does not read, naming them', () => {
    const refused = (raw: Record<string, string>) => () => sequenceBatchingFrom(raw);
    expect(refused({ batchifier: 'ragged' })).toThrow(/batchifier=ragged is not one of/);
    expect(refused({ batchifier: 'pad', pad_value: 'x:' })).toThrow(/pad_value=x:: must be/);
    expect(refused({ batchifier: 'pad', pad_axes: '0' })).toThrow(/pad_axes=0: must be distinct/);
    expect(refused({ batchifier: 'bucket', bucket_boundaries: '8,8' })).toThrow(/increasing/);
    expect(refused({ batchifier: 'stack', pad_value: '0' })).toThrow(
      /pad_value does nothing with batchifier=stack/,
    );
    expect(refused({ batchifier: 'pad', bucket_by: 'x' })).toThrow(/need batchifier=bucket/);
    expect(refused({ bucket_boundaries: '8' })).toThrow(/need batchifier=pad or batchifier=bucket/);
  });

  it('is declared: known keys pass the settings check, bad values fail it', () => {
    const check = (raw: Record<string, string>) => checkModelSettings(servingPropertiesFrom(raw));
    expect(
      check({ batchifier: 'bucket', pad_value: '0', bucket_boundaries: '8,16', bucket_by: 'x' }),
    ).toEqual({ warnings: [], errors: [] });
    expect(check({ batchifier: 'pad', pad_axes: 'one' }).errors).toEqual([
      'pad_axes=one: must be integers split by commas (got "one")',
    ]);
  });
});

describe('shapes read from headers alone', () => {
  const ids = new Tensor('int64', new BigInt64Array(12), [1, 12], 'input_ids');
  const mask = new Tensor('int64', new BigInt64Array(12), [1, 12], 'mask');
  const short = new Tensor('float32', new Float32Array(3), [1, 3], 'short');

  it('reads a .npy header', () => {
    expect(npyShape(encodeNpy(ids))).toEqual([1, 12]);
    expect(npyShape(Uint8Array.of(1, 2, 3))).toBeUndefined();
  });

  it('reads a stored .npz entry by name, else the first; not compressed ones', () => {
    const npz = encodeNpz(NDList.of(short, ids, mask));
    expect(npzShape(npz, 'input_ids')).toEqual([1, 12]);
    expect(npzShape(npz)).toEqual([1, 3]);
    expect(npzShape(npz, 'missing')).toEqual([1, 3]);
    expect(npzShape(encodeNpz(NDList.of(ids), { compress: true }))).toBeUndefined();
  });

  it('looks through 64 entries at most, reading each header as the caller asks', () => {
    const many = NDList.of(
      ...Array.from(
        { length: 70 },
        (_, i) => new Tensor('float32', new Float32Array(i + 1), [1, i + 1], `t${i}`),
      ),
    );
    const npz = encodeNpz(many);
    expect(npzShape(npz, 't63')).toEqual([1, 64]);
    // Past the 64th entry it stops looking: the first entry's shape stands.
    expect(npzShape(npz, 't69')).toEqual([1, 1]);
    const read: number[] = [];
    expect(
      npzShape(npz, 't2', (bytes) => {
        read.push(bytes.byteLength);
        return undefined;
      }),
    ).toBeUndefined();
    expect(read).toHaveLength(3);
  });
});
