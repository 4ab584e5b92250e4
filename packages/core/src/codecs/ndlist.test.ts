import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { ByteReader } from './byte-reader.js';
import { ByteWriter } from './byte-writer.js';
import { readJavaUtf, writeJavaUtf } from './java-utf.js';
import { decodeNDList, encodeNDList } from './ndlist.js';
import { expectKilnError, expectSameList } from './test-support.js';

const ascii = (text: string) => Array.from(text, (char) => char.charCodeAt(0));
/** Java's writeUTF of an ASCII string. */
const utf = (text: string) => [0, text.length, ...ascii(text)];
const int = (value: number) => [
  (value >>> 24) & 0xff,
  (value >>> 16) & 0xff,
  (value >>> 8) & 0xff,
  value & 0xff,
];
const long = (value: number) => [0, 0, 0, 0, ...int(value)];

/** Bytes written by hand from DJL's NDList encoding for: x: float32[2] = [1, -2], and an unnamed 0-d STRING "a\0😀". */
const GOLDEN = Uint8Array.from([
  ...int(2),
  ...utf('NDAR'),
  ...int(3),
  1,
  ...utf('x'),
  ...utf('DENSE'),
  ...utf('FLOAT32'),
  ...int(1),
  ...long(2),
  ...int(0),
  0x3c,
  ...int(8),
  0x00,
  0x00,
  0x80,
  0x3f,
  0x00,
  0x00,
  0x00,
  0xc0,
  ...utf('NDAR'),
  ...int(3),
  0,
  ...utf('DENSE'),
  ...utf('STRING'),
  ...int(0),
  ...int(0),
  ...int(1),
  // "a", NUL as C0 80, then U+1F600 as the surrogates D83D and DE00, three bytes each.
  0x00,
  0x09,
  0x61,
  0xc0,
  0x80,
  0xed,
  0xa0,
  0xbd,
  0xed,
  0xb8,
  0x80,
]);

const GOLDEN_LIST = NDList.of(
  new Tensor('float32', Float32Array.of(1, -2), [2], 'x'),
  new Tensor('string', ['a\0😀'], []),
);

describe('DJL ndlist encoding', () => {
  it('writes exactly the golden bytes', () => {
    expect(encodeNDList(GOLDEN_LIST)).toEqual(GOLDEN);
  });

  it('reads the golden bytes back', () => {
    expectSameList(decodeNDList(GOLDEN), GOLDEN_LIST);
  });

  it('reads version 1 (no name, native little-endian data) and version 2 arrays', () => {
    const v1 = Uint8Array.from([
      ...int(1),
      ...utf('NDAR'),
      ...int(1),
      ...utf('DENSE'),
      ...utf('INT32'),
      ...int(1),
      ...long(2),
      ...int(0),
      ...int(8),
      1,
      0,
      0,
      0,
      0xfe,
      0xff,
      0xff,
      0xff,
    ]);
    expectSameList(decodeNDList(v1), NDList.of(new Tensor('int32', Int32Array.of(1, -2), [2])));
    const v2 = Uint8Array.from([
      ...int(1),
      ...utf('NDAR'),
      ...int(2),
      1,
      ...utf('y'),
      ...utf('DENSE'),
      ...utf('UINT8'),
      ...int(0),
      ...int(0),
      ...int(1),
      9,
    ]);
    expectSameList(decodeNDList(v2), NDList.of(new Tensor('uint8', Uint8Array.of(9), [], 'y')));
  });

  it('byte-swaps big-endian data and skips the layout', () => {
    const bytes = Uint8Array.from([
      ...int(1),
      ...utf('NDAR'),
      ...int(3),
      0,
      ...utf('DENSE'),
      ...utf('FLOAT64'),
      ...int(2),
      ...long(1),
      ...long(1),
      ...int(2),
      0,
      0x4e,
      0,
      0x43,
      0x3e,
      ...int(8),
      0xc0,
      0x04,
      0,
      0,
      0,
      0,
      0,
      0,
    ]);
    expectSameList(
      decodeNDList(bytes),
      NDList.of(new Tensor('float64', Float64Array.of(-2.5), [1, 1])),
    );
  });

  it('round-trips BOOLEAN, INT64 and BFLOAT16 as DJL names them', () => {
    const list = NDList.of(
      new Tensor('bool', Uint8Array.of(1, 0), [2], 'b'),
      new Tensor('int64', BigInt64Array.of(-1n), [1, 1]),
      new Tensor('bfloat16', Uint16Array.of(0x3f80), [1]),
    );
    const bytes = encodeNDList(list);
    const text = new TextDecoder('latin1').decode(bytes);
    for (const name of ['BOOLEAN', 'INT64', 'BFLOAT16']) expect(text).toContain(name);
    expectSameList(decodeNDList(bytes), list);
  });

  it.each([
    ['a bad magic', [...int(1), ...utf('NDAX')], KilnErrorCode.MalformedTensor],
    [
      'version 4',
      [...int(1), ...utf('NDAR'), ...int(4), ...new Array<number>(30).fill(0)],
      KilnErrorCode.UnsupportedFormat,
    ],
    [
      'an unknown dtype',
      [
        ...int(1),
        ...utf('NDAR'),
        ...int(3),
        0,
        ...utf('DENSE'),
        ...utf('COMPLEX64'),
        ...int(0),
        ...int(0),
        0x3c,
        ...int(1),
        1,
      ],
      KilnErrorCode.UnsupportedDType,
    ],
    [
      'a bad byte order mark',
      [
        ...int(1),
        ...utf('NDAR'),
        ...int(3),
        0,
        ...utf('DENSE'),
        ...utf('INT8'),
        ...int(0),
        ...int(0),
        0x3d,
        ...int(1),
        1,
      ],
      KilnErrorCode.MalformedTensor,
    ],
    [
      'a length that does not match the shape',
      [
        ...int(1),
        ...utf('NDAR'),
        ...int(3),
        0,
        ...utf('DENSE'),
        ...utf('INT8'),
        ...int(0),
        ...int(0),
        0x3c,
        ...int(2),
        1,
        2,
      ],
      KilnErrorCode.MalformedTensor,
    ],
    ['trailing bytes', [...GOLDEN, 0], KilnErrorCode.MalformedTensor],
  ])('rejects %s', (_, bytes, code) => {
    expectKilnError(() => decodeNDList(Uint8Array.from(bytes)), [code]);
  });

  it('rejects lying counts and sizes without allocating for them', () => {
    const header = [...utf('NDAR'), ...int(3), 0, ...utf('DENSE')];
    const cases = [
      [...int(0x7fffffff), ...header],
      [
        ...int(1),
        ...header,
        ...utf('FLOAT32'),
        ...int(1),
        ...long(0x7fffffff),
        ...int(0),
        0x3c,
        ...int(0x7ffffffc),
      ],
      [
        ...int(1),
        ...header,
        ...utf('FLOAT32'),
        ...int(2),
        0,
        0,
        0x40,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0x40,
        0,
        0,
        0,
        0,
        0,
        ...int(0),
        0x3c,
        ...int(0),
      ],
      [
        ...int(1),
        ...header,
        ...utf('STRING'),
        ...int(1),
        ...long(0x7fffffff),
        ...int(0),
        ...int(0x7fffffff),
      ],
      [...int(1), ...header, ...utf('INT8'), ...int(0x7fffffff)],
      [...int(1), ...header, ...utf('INT8'), ...int(0), ...int(0x7fffffff)],
      [...int(1), ...header, ...utf('INT8'), ...int(1), 0xff, 0, 0, 0, 0, 0, 0, 1, ...int(0)],
    ];
    for (const bytes of cases)
      expectKilnError(() => decodeNDList(Uint8Array.from(bytes)), [KilnErrorCode.MalformedTensor]);
  });
});

describe("Java's modified UTF-8", () => {
  const encode = (text: string) => {
    const writer = new ByteWriter();
    writeJavaUtf(writer, text, 'test');
    return Array.from(writer.finish());
  };
  const decode = (bytes: number[]) =>
    readJavaUtf(new ByteReader(Uint8Array.from(bytes), 'test'), 'text', 'test');

  it('encodes each UTF-16 unit as Java does', () => {
    expect(encode('')).toEqual([0, 0]);
    expect(encode('A\0')).toEqual([0, 3, 0x41, 0xc0, 0x80]);
    expect(encode('é€')).toEqual([0, 5, 0xc3, 0xa9, 0xe2, 0x82, 0xac]);
    expect(encode('\ud800')).toEqual([0, 3, 0xed, 0xa0, 0x80]);
  });

  it('decodes what Java decodes, including lone surrogates and a raw NUL byte', () => {
    for (const text of ['', 'A\0', 'é€', '😀', '\ud800x', 'x\udfff'])
      expect(decode(encode(text))).toBe(text);
    expect(decode([0, 1, 0])).toBe('\0');
  });

  it.each([
    ['a lone continuation byte', [0, 1, 0x80]],
    ['a 4-byte UTF-8 sequence', [0, 4, 0xf0, 0x9f, 0x98, 0x80]],
    ['a cut 2-byte sequence', [0, 1, 0xc3]],
    ['a bad continuation', [0, 3, 0xe2, 0x41, 0x80]],
  ])('rejects %s', (_, bytes) => {
    expectKilnError(() => decode(bytes), [KilnErrorCode.MalformedTensor]);
  });

  it("refuses strings over writeUTF's 65535-byte limit", () => {
    expectKilnError(() => encode('é'.repeat(40000)), [KilnErrorCode.InvalidInput]);
    expect(encode('a'.repeat(65535)).length).toBe(65537);
  });
});
