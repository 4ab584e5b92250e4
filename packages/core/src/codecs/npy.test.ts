import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { Tensor } from '../tensor/tensor.js';
import { decodeNpy, encodeNpy } from './npy.js';
import { expectKilnError } from './test-support.js';

const latin1 = (text: string) => Uint8Array.from(text, (char) => char.charCodeAt(0));

/** An .npy file built by hand: magic, version, little-endian header length, header, data. */
function npyFile(header: string, data: ArrayLike<number>, major = 1): Uint8Array {
  const text = latin1(header);
  const lengthBytes =
    major === 1
      ? [text.length & 0xff, text.length >> 8]
      : [text.length & 0xff, (text.length >> 8) & 0xff, 0, 0];
  return Uint8Array.from([
    0x93,
    ...latin1('NUMPY'),
    major,
    0,
    ...lengthBytes,
    ...text,
    ...Array.from(data),
  ]);
}

describe('encodeNpy', () => {
  it('writes the exact bytes numpy writes (golden, built from the format spec)', () => {
    const tensor = new Tensor('int16', Int16Array.of(1, -2), [2]);
    // 57 characters of dict, 20 spaces numpy reserves for the growing axis, 40 spaces of padding
    // and a newline: the data starts at byte 128, a multiple of 64.
    const header =
      "{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }" + ' '.repeat(60) + '\n';
    const expected = Uint8Array.from([
      0x93,
      0x4e,
      0x55,
      0x4d,
      0x50,
      0x59,
      0x01,
      0x00,
      0x76,
      0x00,
      ...latin1(header),
      0x01,
      0x00,
      0xfe,
      0xff,
    ]);
    expect(encodeNpy(tensor)).toEqual(expected);
  });

  it('writes 0-d shapes without growth padding and bool as |b1', () => {
    const bytes = encodeNpy(new Tensor('bool', Uint8Array.of(1), []));
    const text = new TextDecoder('latin1').decode(bytes.subarray(10, 128));
    expect(text).toBe(
      "{'descr': '|b1', 'fortran_order': False, 'shape': (), }" + ' '.repeat(62) + '\n',
    );
    expect(bytes.byteLength).toBe(129);
  });

  it('writes strings as fixed-width UTF-32 <U as wide as the longest', () => {
    const bytes = encodeNpy(new Tensor('string', ['a', 'b😀c'], [2]));
    expect(new TextDecoder('latin1').decode(bytes.subarray(10, 24))).toBe("{'descr': '<U3");
    expect(Array.from(new Uint32Array(bytes.slice(128).buffer))).toEqual([
      0x61, 0, 0, 0x62, 0x1f600, 0x63,
    ]);
  });

  it('writes each header for its own dtype and shape, however many shapes come and go', () => {
    // Widths and shapes whose digits run together ('<U12' of 3, '<U1' of 23) stay apart.
    const wide = new Tensor(
      'string',
      Array.from({ length: 3 }, () => 'x'.repeat(12)),
      [3],
    );
    const narrow = new Tensor(
      'string',
      Array.from({ length: 23 }, () => 'y'),
      [23],
    );
    for (let round = 0; round < 2; round++) {
      expect(decodeNpy(encodeNpy(wide)).data).toEqual(wide.data);
      expect(decodeNpy(encodeNpy(narrow)).data).toEqual(narrow.data);
    }
    for (let rows = 1; rows <= 100; rows++) {
      const tensor = new Tensor('float32', new Float32Array(rows).fill(rows), [rows, 1]);
      const decoded = decodeNpy(encodeNpy(tensor));
      expect(decoded.shape).toEqual([rows, 1]);
      expect(decoded.data).toEqual(tensor.data);
    }
  });

  it('refuses bfloat16, which numpy lacks', () => {
    expectKilnError(
      () => encodeNpy(new Tensor('bfloat16', new Uint16Array(2), [2])),
      [KilnErrorCode.UnsupportedDType],
    );
  });
});

describe('decodeNpy', () => {
  it('reads each body by its own header while bodies with the same header come one after another', () => {
    const first = Buffer.from(encodeNpy(new Tensor('float32', new Float32Array([1, 2]), [1, 2])));
    const same = Buffer.from(encodeNpy(new Tensor('float32', new Float32Array([3, 4]), [1, 2])));
    expect(decodeNpy(first).shape).toEqual([1, 2]);
    // The first body changes after it was read (a server reuses or moves its memory): the next
    // body with the same header is still read by that header, not by what the first became.
    first.fill(0);
    const again = decodeNpy(same);
    expect(again.shape).toEqual([1, 2]);
    expect(Array.from(again.data as Float32Array)).toEqual([3, 4]);
    const other = encodeNpy(new Tensor('int32', new Int32Array([5, 6, 7]), [3]));
    expect(decodeNpy(other).shape).toEqual([3]);
    expect(decodeNpy(other).dtype).toBe('int32');
    expect(() => decodeNpy(first)).toThrow(/npy/);
  });

  it('byte-swaps big-endian data', () => {
    const tensor = decodeNpy(
      npyFile(
        "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n",
        [0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe],
      ),
    );
    expect(Array.from(tensor.data as Int32Array)).toEqual([0x0102, -2]);
  });

  it('byte-swaps big-endian doubles and 64-bit integers', () => {
    const f8 = decodeNpy(
      npyFile(
        "{'descr': '>f8', 'fortran_order': False, 'shape': (), }",
        [0x3f, 0xf8, 0, 0, 0, 0, 0, 0],
      ),
    );
    expect(f8.data).toEqual(Float64Array.of(1.5));
    const u8 = decodeNpy(
      npyFile(
        "{'descr': '>u8', 'fortran_order': False, 'shape': (1,), }",
        [0xff, 0, 0, 0, 0, 0, 0, 1],
      ),
    );
    expect(u8.data).toEqual(BigUint64Array.of(0xff00000000000001n));
  });

  it('transposes fortran_order data into row-major order', () => {
    // Column-major [[0, 1, 2], [3, 4, 5]] is stored 0 3 1 4 2 5.
    const tensor = decodeNpy(
      npyFile("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", [0, 3, 1, 4, 2, 5]),
    );
    expect(tensor.shape).toEqual([2, 3]);
    expect(Array.from(tensor.data as Uint8Array)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('transposes 3-d fortran_order data', () => {
    const shape = [2, 3, 4];
    const fortran = new Uint8Array(24);
    for (let i = 0; i < 2; i++)
      for (let j = 0; j < 3; j++)
        for (let k = 0; k < 4; k++) fortran[i + 2 * j + 6 * k] = i * 12 + j * 4 + k;
    const tensor = decodeNpy(
      npyFile("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 4), }", fortran),
    );
    expect(tensor.shape).toEqual(shape);
    expect(Array.from(tensor.data as Uint8Array)).toEqual(Array.from({ length: 24 }, (_, i) => i));
  });

  it('reads <U and >U strings, dropping trailing NULs only', () => {
    const le = decodeNpy(
      npyFile(
        "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }",
        [0x61, 0, 0, 0, 0, 0, 0, 0, 0x62, 0, 0, 0, 0x00, 0xf6, 0x01, 0, 0x63, 0, 0, 0, 0, 0, 0, 0],
      ),
    );
    expect(le.data).toEqual(['a\0b', '😀c']);
    const be = decodeNpy(
      npyFile("{'descr': '>U1', 'fortran_order': False, 'shape': (1,), }", [0, 0, 0, 0x7a]),
    );
    expect(be.data).toEqual(['z']);
  });

  it('reads |S byte strings as UTF-8', () => {
    const tensor = decodeNpy(
      npyFile(
        "{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }",
        [0x68, 0x69, 0, 0xc3, 0xa9, 0],
      ),
    );
    expect(tensor.data).toEqual(['hi', 'é']);
  });

  it('reads version 2.0 and 3.0 headers', () => {
    const v2 = decodeNpy(
      npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", [0, 0, 0x80, 0x3f], 2),
    );
    expect(v2.data).toEqual(Float32Array.of(1));
    const header = new TextEncoder().encode(
      "{'descr': '<i1', 'fortran_order': False, 'shape': (1,), } # é",
    );
    const v3 = Uint8Array.from([
      0x93,
      ...latin1('NUMPY'),
      3,
      0,
      header.length,
      0,
      0,
      0,
      ...header,
      5,
    ]);
    expectKilnError(() => decodeNpy(v3)); // a comment is not a Python literal
    const clean = new TextEncoder().encode(
      "{'descr': '|i1', 'fortran_order': False, 'shape': (1,), }  ",
    );
    expect(
      decodeNpy(
        Uint8Array.from([0x93, ...latin1('NUMPY'), 3, 0, clean.length, 0, 0, 0, ...clean, 5]),
      ).data,
    ).toEqual(Int8Array.of(5));
  });

  it('normalizes non-zero bool bytes to 1', () => {
    const tensor = decodeNpy(
      npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", [0, 7, 1]),
    );
    expect(Array.from(tensor.data as Uint8Array)).toEqual([0, 1, 1]);
  });

  it('accepts the header in any key order and with double quotes', () => {
    const tensor = decodeNpy(
      npyFile('{"shape": (1, 1), "fortran_order": False, "descr": "<u2"}', [7, 0]),
    );
    expect(tensor.shape).toEqual([1, 1]);
    expect(tensor.data).toEqual(Uint16Array.of(7));
  });

  it.each([
    ['a list for the shape', "{'descr': '<i2', 'fortran_order': False, 'shape': [1], }"],
    ['a missing key', "{'descr': '<i2', 'shape': (1,), }"],
    ['an extra key', "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), 'x': 1}"],
    ['a repeated key', "{'descr': '<i2', 'descr': '<i2', 'fortran_order': False, 'shape': (1,)}"],
    ['a call', "{'descr': __import__('os'), 'fortran_order': False, 'shape': (1,)}"],
    ['a negative dimension', "{'descr': '<i2', 'fortran_order': False, 'shape': (-1,), }"],
    ['a fractional dimension', "{'descr': '<i2', 'fortran_order': False, 'shape': (1.5,), }"],
    ['a non-boolean order', "{'descr': '<i2', 'fortran_order': 0, 'shape': (1,), }"],
    ['an unterminated string', "{'descr': '<i2, 'fortran_order': False, 'shape': (1,), }"],
    ['trailing text', "{'descr': '<i2', 'fortran_order': False, 'shape': (1,), } x"],
    [
      'deep nesting',
      `{'descr': '<i2', 'fortran_order': False, 'shape': ${'('.repeat(40)}${')'.repeat(40)}}`,
    ],
    ['not a dict', "('<i2', False, (1,))"],
  ])('rejects a header with %s', (_, header) => {
    expectKilnError(() => decodeNpy(npyFile(header, [1, 0])), [KilnErrorCode.MalformedTensor]);
  });

  it.each(['<c8', '|O', '<M8[ns]', '|V4', '<i3', '<f16'])(
    'refuses dtype %s as UNSUPPORTED_DTYPE',
    (descr) => {
      const header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (1,), }`;
      expectKilnError(
        () => decodeNpy(npyFile(header, [0, 0, 0, 0])),
        [KilnErrorCode.UnsupportedDType],
      );
    },
  );

  it('refuses structured dtypes as UNSUPPORTED_DTYPE', () => {
    const header = "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }";
    expectKilnError(
      () => decodeNpy(npyFile(header, [0, 0, 0, 0])),
      [KilnErrorCode.UnsupportedDType],
    );
  });

  it('refuses unknown format versions as UNSUPPORTED_FORMAT', () => {
    const bytes = npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", [1]);
    bytes[6] = 4;
    expectKilnError(() => decodeNpy(bytes), [KilnErrorCode.UnsupportedFormat]);
  });

  it('rejects lying shapes without allocating for them', () => {
    const huge = npyFile(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000000), }",
      [0],
    );
    expectKilnError(() => decodeNpy(huge), [KilnErrorCode.MalformedTensor]);
    const large = npyFile(
      "{'descr': '<U1000000', 'fortran_order': False, 'shape': (100000,), }",
      [0],
    );
    expectKilnError(() => decodeNpy(large), [KilnErrorCode.MalformedTensor]);
    const longHeader = Uint8Array.from([
      0x93,
      ...latin1('NUMPY'),
      2,
      0,
      0xff,
      0xff,
      0xff,
      0x7f,
      0x7b,
    ]);
    expectKilnError(() => decodeNpy(longHeader), [KilnErrorCode.MalformedTensor]);
  });

  it('rejects extra data after the array and invalid code points', () => {
    expectKilnError(() =>
      decodeNpy(npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", [1, 2])),
    );
    expectKilnError(() =>
      decodeNpy(
        npyFile("{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }", [0, 0, 0x11, 0]),
      ),
    );
  });

  it('decodes bodies that repeat one header, each with its own data and shape', () => {
    const bodies = [1, 2, 3].map((v) =>
      encodeNpy(new Tensor('float32', new Float32Array([v, -v]), [1, 2])),
    );
    for (const [i, body] of bodies.entries()) {
      const tensor = decodeNpy(body);
      expect(Array.from(tensor.data as Float32Array)).toEqual([i + 1, -(i + 1)]);
    }
    // A header that failed once fails again (failures are not remembered as headers).
    const bad = npyFile("{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }", [1, 2]);
    for (let i = 0; i < 2; i++) {
      expectKilnError(() => decodeNpy(bad), [KilnErrorCode.MalformedTensor]);
    }
  });

  it('gives the decoded tensor the name it is asked to', () => {
    expect(decodeNpy(encodeNpy(new Tensor('int8', Int8Array.of(1), [1])), 'logits').name).toBe(
      'logits',
    );
  });
});
