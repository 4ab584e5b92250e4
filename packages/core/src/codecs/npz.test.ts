import { crc32 } from 'node:zlib';
import { unzipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { ByteWriter } from './byte-writer.js';
import { encodeNpy } from './npy.js';
import { decodeNpz, encodeNpz } from './npz.js';
import { expectKilnError, expectSameList } from './test-support.js';

const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;

/** Offsets of every record with `signature` (test archives hold no such bytes elsewhere). */
function records(bytes: Uint8Array, signature: number): number[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const found: number[] = [];
  for (let at = 0; at + 4 <= bytes.byteLength; at++)
    if (view.getUint32(at, true) === signature) found.push(at);
  return found;
}

/** A copy of `bytes` with a little-endian field of every central (and local) record rewritten. */
function patch(
  bytes: Uint8Array,
  field: { central: number; local?: number; width: 2 | 4 },
  value: number,
): Uint8Array {
  const copy = bytes.slice();
  const view = new DataView(copy.buffer);
  const set = (at: number) =>
    field.width === 2 ? view.setUint16(at, value, true) : view.setUint32(at, value, true);
  for (const at of records(copy, CENTRAL_SIGNATURE)) set(at + field.central);
  if (field.local !== undefined) {
    for (const at of records(copy, LOCAL_SIGNATURE)) set(at + field.local);
  }
  return copy;
}

const FLAGS = { central: 8, local: 6, width: 2 } as const;
const METHOD = { central: 10, local: 8, width: 2 } as const;
const CRC = { central: 16, local: 14, width: 4 } as const;
const COMPRESSED_SIZE = { central: 20, width: 4 } as const;
const SIZE = { central: 24, width: 4 } as const;

const sample = NDList.of(
  new Tensor('float32', Float32Array.of(1, 2, 3), [3], 'a'),
  new Tensor('int8', Int8Array.of(-1), []),
  new Tensor('string', ['x', 'yz'], [2]),
);

/**
 * A one-entry stored archive in full zip64 form, built by hand from the zip specification: every
 * size and offset in the classic records is 0xFFFFFFFF and the real values sit in zip64 extra
 * fields and the zip64 end-of-central-directory record.
 */
function zip64Archive(name: string, data: Uint8Array): Uint8Array {
  const w = new ByteWriter();
  const le = true;
  const nameBytes = new TextEncoder().encode(name);
  const crc = crc32(data);
  const size = BigInt(data.byteLength);
  w.u32(0x04034b50, le);
  for (const field of [45, 0, 0, 0, 0x21]) w.u16(field, le);
  w.u32(crc, le);
  w.u32(0xffffffff, le);
  w.u32(0xffffffff, le);
  w.u16(nameBytes.byteLength, le);
  w.u16(20, le);
  w.bytes(nameBytes);
  w.u16(1, le);
  w.u16(16, le);
  w.i64(size, le);
  w.i64(size, le);
  w.bytes(data);
  const directory = 30 + nameBytes.byteLength + 20 + data.byteLength;
  w.u32(0x02014b50, le);
  for (const field of [45, 45, 0, 0, 0, 0x21]) w.u16(field, le);
  w.u32(crc, le);
  w.u32(0xffffffff, le);
  w.u32(0xffffffff, le);
  for (const field of [nameBytes.byteLength, 28, 0, 0, 0]) w.u16(field, le);
  w.u32(0, le);
  w.u32(0xffffffff, le);
  w.bytes(nameBytes);
  w.u16(1, le);
  w.u16(24, le);
  w.i64(size, le);
  w.i64(size, le);
  w.i64(0n, le);
  const directorySize = 46 + nameBytes.byteLength + 28;
  const record = directory + directorySize;
  w.u32(0x06064b50, le);
  w.i64(44n, le);
  w.u16(45, le);
  w.u16(45, le);
  w.u32(0, le);
  w.u32(0, le);
  w.i64(1n, le);
  w.i64(1n, le);
  w.i64(BigInt(directorySize), le);
  w.i64(BigInt(directory), le);
  w.u32(0x07064b50, le);
  w.u32(0, le);
  w.i64(BigInt(record), le);
  w.u32(1, le);
  w.u32(0x06054b50, le);
  for (const field of [0, 0, 0xffff, 0xffff]) w.u16(field, le);
  w.u32(0xffffffff, le);
  w.u32(0xffffffff, le);
  w.u16(0, le);
  return w.finish();
}

/** 8 MB of zeros deflated to a few kilobytes. */
const bomb = encodeNpz(NDList.of(new Tensor('uint8', new Uint8Array(8_000_000), [8_000_000])), {
  compress: true,
});

describe('npz', () => {
  it('names entries <name>.npy in list order, unnamed ones arr_0, arr_1…', () => {
    const list = NDList.of(
      new Tensor('uint8', Uint8Array.of(1), [1]),
      new Tensor('uint8', Uint8Array.of(2), [1], '10'),
      new Tensor('uint8', Uint8Array.of(3), [1]),
      new Tensor('uint8', Uint8Array.of(4), [1], '2'),
    );
    const bytes = encodeNpz(list);
    expect(Object.keys(unzipSync(bytes))).toEqual(['arr_0.npy', '10.npy', 'arr_1.npy', '2.npy']);
    expect(decodeNpz(bytes).names).toEqual(['arr_0', '10', 'arr_1', '2']);
  });

  it('refuses two tensors with one name', () => {
    const list = NDList.of(
      new Tensor('int8', Int8Array.of(1), [1], 'arr_0'),
      new Tensor('int8', Int8Array.of(1), [1]),
    );
    expectKilnError(() => encodeNpz(list), [KilnErrorCode.InvalidInput]);
  });

  it('stores by default and deflates with compress: true', () => {
    const list = NDList.of(new Tensor('float32', new Float32Array(100_000), [100_000], 'zeros'));
    const stored = encodeNpz(list);
    const deflated = encodeNpz(list, { compress: true });
    expect(new DataView(stored.buffer).getUint16(8, true)).toBe(0);
    expect(new DataView(deflated.buffer).getUint16(8, true)).toBe(8);
    expect(deflated.byteLength).toBeLessThan(stored.byteLength / 50);
    expectSameList(decodeNpz(deflated), list);
  });

  it('keeps non-ASCII names', () => {
    const list = NDList.of(new Tensor('int8', Int8Array.of(1), [1], 'größe/😀'));
    expect(decodeNpz(encodeNpz(list)).names).toEqual(['größe/😀']);
  });

  it('checks the declared total against maxBytes before inflating', () => {
    expect(bomb.byteLength).toBeLessThan(50_000);
    expectKilnError(
      () => decodeNpz(bomb, { maxBytes: 1_000_000 }),
      [KilnErrorCode.PayloadTooLarge],
    );
  });

  it('stops inflating an entry that outgrows its declared size', () => {
    const lying = patch(bomb, SIZE, 1000);
    const error = expectKilnError(
      () => decodeNpz(lying, { maxBytes: 1_000_000 }),
      [KilnErrorCode.MalformedTensor],
    );
    expect(error.message).toMatch(/more than its declared 1000 bytes/);
  });

  it('rejects an entry that inflates to less than declared', () => {
    const bytes = encodeNpz(sample, { compress: true });
    const sizes = records(bytes, CENTRAL_SIGNATURE).map((at) =>
      new DataView(bytes.buffer).getUint32(at + 24, true),
    );
    expectKilnError(
      () => decodeNpz(patch(bytes, SIZE, Math.max(...sizes) + 1)),
      [KilnErrorCode.MalformedTensor],
    );
  });

  it('rejects a failed CRC, a stored entry with two sizes, and data past the archive', () => {
    const bytes = encodeNpz(sample);
    expectKilnError(
      () => decodeNpz(patch(bytes, CRC, 0x12345678)),
      [KilnErrorCode.MalformedTensor],
    );
    expectKilnError(() => decodeNpz(patch(bytes, SIZE, 5)), [KilnErrorCode.MalformedTensor]);
    expectKilnError(
      () => decodeNpz(patch(patch(bytes, SIZE, 0x7fffffff), COMPRESSED_SIZE, 0x7fffffff)),
      [KilnErrorCode.MalformedTensor, KilnErrorCode.PayloadTooLarge],
    );
  });

  it('refuses encrypted entries and unknown compression methods as UNSUPPORTED_FORMAT', () => {
    const bytes = encodeNpz(sample);
    expectKilnError(() => decodeNpz(patch(bytes, FLAGS, 1)), [KilnErrorCode.UnsupportedFormat]);
    expectKilnError(() => decodeNpz(patch(bytes, METHOD, 12)), [KilnErrorCode.UnsupportedFormat]);
  });

  it('reads zip64 archives', () => {
    const tensor = new Tensor('int32', Int32Array.of(7, -7), [2], 'z');
    const list = decodeNpz(zip64Archive('z.npy', encodeNpy(tensor)));
    expect(list.names).toEqual(['z']);
    expect(list.get(0).data).toEqual(tensor.data);
  });

  it('reads an empty archive', () => {
    expect(decodeNpz(encodeNpz(new NDList())).length).toBe(0);
  });
});
