import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { decodeSafetensors, decodeSafetensorsFile, encodeSafetensors } from './safetensors.js';
import { expectKilnError, expectSameList } from './test-support.js';

/** A file built by hand: u64 little-endian header length, the JSON header, the data. */
function file(header: unknown, data: ArrayLike<number>): Uint8Array {
  const json = new TextEncoder().encode(
    typeof header === 'string' ? header : JSON.stringify(header),
  );
  const out = new Uint8Array(8 + json.byteLength + data.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  out.set(Array.from(data), 8 + json.byteLength);
  return out;
}

describe('safetensors', () => {
  it('writes the header in list order, padded with spaces to 8 bytes, then the data', () => {
    const list = NDList.of(
      new Tensor('int16', Int16Array.of(1, -1), [2], 'b'),
      new Tensor('bfloat16', Uint16Array.of(0x3f80), [], '10'),
    );
    const bytes = encodeSafetensors(list, { metadata: { format: 'pt' } });
    const length = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect(length % 8).toBe(0);
    const header = new TextDecoder().decode(bytes.subarray(8, 8 + length));
    expect(header.trimEnd()).toBe(
      '{"__metadata__":{"format":"pt"},"b":{"dtype":"I16","shape":[2],"data_offsets":[0,4]},"10":{"dtype":"BF16","shape":[],"data_offsets":[4,6]}}',
    );
    expect(Array.from(bytes.subarray(8 + length))).toEqual([1, 0, 0xff, 0xff, 0x80, 0x3f]);
    const decoded = decodeSafetensorsFile(bytes);
    expectSameList(decoded.tensors, list);
    expect(decoded.metadata).toEqual({ format: 'pt' });
  });

  it('decodes in data order, whatever the header order', () => {
    const bytes = file(
      {
        second: { dtype: 'U8', shape: [1], data_offsets: [2, 3] },
        first: { dtype: 'U8', shape: [2], data_offsets: [0, 2] },
        empty: { dtype: 'F32', shape: [0, 4], data_offsets: [3, 3] },
      },
      [1, 2, 3],
    );
    expect(decodeSafetensors(bytes).names).toEqual(['first', 'second', 'empty']);
  });

  it('reads every dtype name the format defines for Kiln dtypes', () => {
    const names = [
      'BOOL',
      'U8',
      'I8',
      'I16',
      'U16',
      'F16',
      'BF16',
      'I32',
      'U32',
      'F32',
      'F64',
      'I64',
      'U64',
    ];
    const widths = [1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8];
    let offset = 0;
    const header: Record<string, unknown> = {};
    names.forEach((dtype, i) => {
      header[`t${i}`] = { dtype, shape: [1], data_offsets: [offset, offset + widths[i]!] };
      offset += widths[i]!;
    });
    const dtypes = decodeSafetensors(file(header, new Array<number>(offset).fill(1))).tensors.map(
      (t) => t.dtype,
    );
    expect(dtypes).toEqual([
      'bool',
      'uint8',
      'int8',
      'int16',
      'uint16',
      'float16',
      'bfloat16',
      'int32',
      'uint32',
      'float32',
      'float64',
      'int64',
      'uint64',
    ]);
  });

  it.each([
    [
      'overlapping tensors',
      {
        a: { dtype: 'U8', shape: [2], data_offsets: [0, 2] },
        b: { dtype: 'U8', shape: [2], data_offsets: [1, 3] },
      },
      4,
    ],
    ['a gap', { a: { dtype: 'U8', shape: [1], data_offsets: [1, 2] } }, 2],
    ['leftover data', { a: { dtype: 'U8', shape: [1], data_offsets: [0, 1] } }, 2],
    ['offsets past the data', { a: { dtype: 'U8', shape: [4], data_offsets: [0, 4] } }, 2],
    [
      'a size that does not match dtype × shape',
      { a: { dtype: 'F32', shape: [2], data_offsets: [0, 4] } },
      4,
    ],
    ['reversed offsets', { a: { dtype: 'U8', shape: [0], data_offsets: [2, 0] } }, 2],
    ['fractional offsets', { a: { dtype: 'U8', shape: [1], data_offsets: [0, 1.5] } }, 2],
    ['a negative dimension', { a: { dtype: 'U8', shape: [-1], data_offsets: [0, 0] } }, 0],
    ['a missing shape', { a: { dtype: 'U8', data_offsets: [0, 0] } }, 0],
    ['non-string metadata', { __metadata__: { a: 1 } }, 0],
    ['an array header', [], 0],
    ['a header that is not JSON', '{"a": ', 0],
  ])('rejects %s', (_, header, dataLength) => {
    expectKilnError(
      () => decodeSafetensors(file(header, new Array<number>(dataLength).fill(0))),
      [KilnErrorCode.MalformedTensor],
    );
  });

  it.each(['F8_E4M3', 'C64', 'STRING', ''])('refuses dtype %j', (dtype) => {
    const bytes = file({ a: { dtype, shape: [1], data_offsets: [0, 1] } }, [0]);
    expectKilnError(
      () => decodeSafetensors(bytes),
      [KilnErrorCode.UnsupportedDType, KilnErrorCode.MalformedTensor],
    );
  });

  it('bounds the header length before reading it', () => {
    const bytes = new Uint8Array(16);
    const view = new DataView(bytes.buffer);
    view.setBigUint64(0, 2n ** 63n, true);
    expectKilnError(() => decodeSafetensors(bytes), [KilnErrorCode.MalformedTensor]);
    view.setBigUint64(0, 200_000_000n, true);
    expectKilnError(() => decodeSafetensors(bytes), [KilnErrorCode.MalformedTensor]);
    view.setBigUint64(0, 9n, true);
    expectKilnError(() => decodeSafetensors(bytes), [KilnErrorCode.MalformedTensor]);
  });

  it('refuses string tensors and the reserved name when encoding', () => {
    expectKilnError(
      () => encodeSafetensors(NDList.of(new Tensor('string', ['a'], [1]))),
      [KilnErrorCode.UnsupportedDType],
    );
    expectKilnError(
      () => encodeSafetensors(NDList.of(new Tensor('int8', Int8Array.of(1), [1], '__metadata__'))),
      [KilnErrorCode.InvalidInput],
    );
  });

  it('views aligned data without copying', () => {
    const bytes = encodeSafetensors(
      NDList.of(new Tensor('float64', Float64Array.of(1, 2), [2], 'x')),
    );
    const tensor = decodeSafetensors(bytes).get(0);
    expect((tensor.data as Float64Array).buffer).toBe(bytes.buffer);
  });
});
