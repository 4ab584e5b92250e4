import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { expectKilnError } from './test-support.js';
import { decodeJsonTensors, decodeV2Tensor, encodeJsonTensors, encodeV2Tensor } from './v2-json.js';

const tensor = (datatype: string, shape: number[], data: unknown) =>
  decodeV2Tensor({ name: 't', shape, datatype, data });

describe('v2 JSON tensors', () => {
  it('decodes flat and nested row-major data alike', () => {
    const flat = tensor('FP32', [2, 3], [1, 2, 3, 4, 5, 6]);
    const nested = tensor(
      'FP32',
      [2, 3],
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
    );
    expect(flat.data).toEqual(Float32Array.of(1, 2, 3, 4, 5, 6));
    expect(nested.data).toEqual(flat.data);
    expect(nested.shape).toEqual([2, 3]);
    expect(nested.name).toBe('t');
  });

  it('decodes 0-d tensors from a scalar or a one-element array, and zero-size shapes', () => {
    expect(tensor('INT32', [], 7).data).toEqual(Int32Array.of(7));
    expect(tensor('INT32', [], [7]).data).toEqual(Int32Array.of(7));
    expect(tensor('INT32', [2, 0], [[], []]).size).toBe(0);
    expect(tensor('INT32', [0, 3], []).size).toBe(0);
  });

  it('converts each datatype', () => {
    expect(tensor('BOOL', [2], [true, false]).data).toEqual(Uint8Array.of(1, 0));
    expect(tensor('UINT8', [1], [255]).data).toEqual(Uint8Array.of(255));
    expect(tensor('INT8', [1], [-128]).data).toEqual(Int8Array.of(-128));
    expect(tensor('UINT32', [1], [4294967295]).data).toEqual(Uint32Array.of(4294967295));
    expect(tensor('FP16', [2], [1, 65504]).data).toEqual(Uint16Array.of(0x3c00, 0x7bff));
    expect(tensor('BF16', [1], [1]).data).toEqual(Uint16Array.of(0x3f80));
    expect(tensor('FP64', [3], [0.1, 'NaN', '-Infinity']).data).toEqual(
      Float64Array.of(0.1, NaN, -Infinity),
    );
    expect(tensor('BYTES', [2], ['a', '😀']).data).toEqual(['a', '😀']);
  });

  it('takes 64-bit integers as safe numbers or decimal strings', () => {
    expect(tensor('INT64', [3], [-5, '-9223372036854775808', '9223372036854775807']).data).toEqual(
      BigInt64Array.of(-5n, -(2n ** 63n), 2n ** 63n - 1n),
    );
    expect(tensor('UINT64', [1], ['18446744073709551615']).data).toEqual(
      BigUint64Array.of(2n ** 64n - 1n),
    );
  });

  it.each([
    ['INT64', ['9223372036854775808']],
    ['INT64', [2 ** 60]],
    ['INT64', [1.5]],
    ['INT64', ['1e3']],
    ['UINT64', [-1]],
    ['UINT64', ['-1']],
    ['INT8', [128]],
    ['UINT16', [-1]],
    ['INT32', [1.5]],
    ['BOOL', [1]],
    ['FP32', ['1.5']],
    ['FP32', [null]],
    ['BYTES', [1]],
  ])('rejects %s element %j', (datatype, data) => {
    expectKilnError(() => tensor(datatype, [1], data), [KilnErrorCode.MalformedTensor]);
  });

  it.each([
    ['too few elements', [2, 3], [1, 2, 3, 4, 5]],
    ['too many elements', [2], [1, 2, 3]],
    [
      'nesting that does not match the shape',
      [2, 3],
      [
        [1, 2],
        [3, 4],
        [5, 6],
      ],
    ],
    ['ragged nesting', [2, 2], [[1, 2], [3]]],
    ['mixed nesting', [2, 2], [[1, 2], 3, 4]],
    ['nesting deeper than the shape', [2], [[1], [2]]],
    ['a huge shape', [1e9, 1e9], [1]],
    ['a negative dimension', [-1], []],
    ['no data', [1], undefined],
  ])('rejects %s', (_, shape, data) => {
    expectKilnError(() => tensor('FP32', shape, data), [KilnErrorCode.MalformedTensor]);
  });

  it('rejects malformed tensor objects and unknown datatypes', () => {
    expectKilnError(
      () => decodeV2Tensor({ shape: [1], datatype: 'FP32', data: [1] }),
      [KilnErrorCode.MalformedTensor],
    );
    expectKilnError(
      () => decodeV2Tensor({ name: 'x', datatype: 'FP32', data: [1] }),
      [KilnErrorCode.MalformedTensor],
    );
    expectKilnError(
      () => decodeV2Tensor({ name: 'x', shape: [1], datatype: 'FP32', data: [1], parameters: 3 }),
      [KilnErrorCode.MalformedTensor],
    );
    expectKilnError(() => decodeV2Tensor([1]), [KilnErrorCode.MalformedTensor]);
    expectKilnError(() => tensor('FP8', [1], [1]), [KilnErrorCode.UnsupportedDType]);
  });

  it('encodes flat data, 64-bit integers as numbers when safe, non-finite floats as strings', () => {
    expect(
      encodeV2Tensor(new Tensor('int64', BigInt64Array.of(1n, 2n ** 60n), [1, 2], 'ids')),
    ).toEqual({
      name: 'ids',
      shape: [1, 2],
      datatype: 'INT64',
      data: [1, '1152921504606846976'],
    });
    expect(
      encodeV2Tensor(new Tensor('float16', Uint16Array.of(0x3c00, 0x7c00, 0x7e00), [3]), 'h').data,
    ).toEqual([1, 'Infinity', 'NaN']);
    expect(encodeV2Tensor(new Tensor('bool', Uint8Array.of(1, 0), [2]), 'b').data).toEqual([
      true,
      false,
    ]);
  });

  it('names unnamed tensors arr_0, arr_1… in a reply', () => {
    const list = NDList.of(
      new Tensor('int8', Int8Array.of(1), [1]),
      new Tensor('int8', Int8Array.of(2), [1], 'y'),
    );
    expect(encodeJsonTensors(list).map((t) => t.name)).toEqual(['arr_0', 'y']);
  });
});

describe('decodeJsonTensors', () => {
  const v2 = { name: 'x', shape: [2], datatype: 'INT32', data: [1, 2] };

  it('reads a v2 request body and a bare array of v2 tensors', () => {
    expect(decodeJsonTensors({ id: '1', inputs: [v2] }).names).toEqual(['x']);
    expect(decodeJsonTensors([v2, { ...v2, name: 'y' }]).names).toEqual(['x', 'y']);
  });

  it('reads a plain nested numeric array as one float32 tensor of the inferred shape', () => {
    const list = decodeJsonTensors([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(list.length).toBe(1);
    expect(list.get(0).dtype).toBe('float32');
    expect(list.get(0).shape).toEqual([2, 3]);
    expect(list.get(0).data).toEqual(Float32Array.of(1, 2, 3, 4, 5, 6));
    expect(decodeJsonTensors([[], []]).get(0).shape).toEqual([2, 0]);
    expect(decodeJsonTensors(2.5).get(0).shape).toEqual([]);
  });

  it('reads [] as an empty list, the encoding of an empty reply', () => {
    expect(decodeJsonTensors([]).length).toBe(0);
  });

  it.each([
    ['a ragged array', [[1, 2], [3]]],
    ['a mixed array', [[1, 2], 3]],
    ['non-numbers', [1, 'a']],
    ['an object without inputs', { outputs: [] }],
    ['a string', 'hello'],
    ['null', null],
    ['an array nested 100 deep', JSON.parse('['.repeat(100) + ']'.repeat(100))],
  ])('rejects %s', (_, value) => {
    expectKilnError(() => decodeJsonTensors(value), [KilnErrorCode.MalformedTensor]);
  });
});
