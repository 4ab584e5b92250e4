import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { Tensor } from '../tensor/tensor.js';
import { expectKilnError } from './test-support.js';
import { decodeBinaryTensor, encodeBinaryTensor } from './v2-binary.js';

describe('v2 binary tensors', () => {
  it('lays numeric data out raw and little-endian', () => {
    const bytes = encodeBinaryTensor(new Tensor('int32', Int32Array.of(1, -2), [2]));
    expect(Array.from(bytes)).toEqual([1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]);
  });

  it('lays BYTES out as a 4-byte little-endian length then UTF-8', () => {
    const bytes = encodeBinaryTensor(new Tensor('string', ['hi', '', 'é'], [3]));
    expect(Array.from(bytes)).toEqual([2, 0, 0, 0, 0x68, 0x69, 0, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xa9]);
    expect(decodeBinaryTensor('BYTES', [3], bytes).data).toEqual(['hi', '', 'é']);
  });

  it('accepts v2 datatype names and Kiln dtypes', () => {
    const bytes = Uint8Array.of(0, 0x3c);
    expect(decodeBinaryTensor('FP16', [1], bytes).dtype).toBe('float16');
    expect(decodeBinaryTensor('float16', [1], bytes, 'h').name).toBe('h');
    expectKilnError(() => decodeBinaryTensor('FP8', [1], bytes), [KilnErrorCode.UnsupportedDType]);
  });

  it('views aligned data in place and copies unaligned data', () => {
    const buffer = new Uint8Array(13);
    const aligned = decodeBinaryTensor('FP32', [3], buffer.subarray(0, 12));
    expect((aligned.data as Float32Array).buffer).toBe(buffer.buffer);
    const unaligned = decodeBinaryTensor('FP32', [3], buffer.subarray(1, 13));
    expect((unaligned.data as Float32Array).buffer).not.toBe(buffer.buffer);
  });

  it.each([
    ['FP32', [2], 7],
    ['FP32', [2], 9],
    ['INT64', [1], 4],
    ['UINT8', [1e9, 1e9], 1],
  ])('rejects %s %j in %d bytes', (datatype, shape, length) => {
    expectKilnError(
      () => decodeBinaryTensor(datatype, shape, new Uint8Array(length)),
      [KilnErrorCode.MalformedTensor],
    );
  });

  it.each([
    ['a length past the end', [1], [5, 0, 0, 0, 0x61]],
    ['trailing bytes', [1], [1, 0, 0, 0, 0x61, 0]],
    ['invalid UTF-8', [1], [1, 0, 0, 0, 0xff]],
    ['more elements than bytes could hold', [1e6], [0, 0, 0, 0]],
  ])('rejects BYTES with %s', (_, shape, bytes) => {
    expectKilnError(
      () => decodeBinaryTensor('BYTES', shape, Uint8Array.from(bytes)),
      [KilnErrorCode.MalformedTensor],
    );
  });
});
