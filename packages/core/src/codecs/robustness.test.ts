import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { toFloat16Bits } from './float16.js';
import { decodeNDList, encodeNDList } from './ndlist.js';
import { decodeNpy, encodeNpy } from './npy.js';
import { decodeNpz, encodeNpz } from './npz.js';
import { decodeSafetensors, encodeSafetensors } from './safetensors.js';
import { decodeTensors, encodeTensors } from './tensor-codec.js';
import { decodesOrKilnError, expectKilnError } from './test-support.js';
import { decodeBinaryTensor, encodeBinaryTensor } from './v2-binary.js';

const numeric = NDList.of(
  new Tensor('float32', Float32Array.of(1.5, -2, Number.NaN), [3], 'x'),
  new Tensor('int64', BigInt64Array.of(-(2n ** 63n), 7n), [1, 2]),
  new Tensor('float16', Uint16Array.of(toFloat16Bits(0.5)), [], 'h'),
  new Tensor('bool', Uint8Array.of(1, 0, 1, 1), [2, 2], 'mask'),
  new Tensor('uint8', new Uint8Array(0), [0, 3], 'empty'),
);
const withStrings = new NDList([...numeric, new Tensor('string', ['a', '', 'é😀'], [3], 'words')]);
const strings = new Tensor('string', ['hello', 'wörld', ''], [3]);

/** Small valid encodings, each with the decoder that must reject every damaged copy. */
const CASES: Record<string, { bytes: Uint8Array; decode(bytes: Uint8Array): unknown }> = {
  ndlist: { bytes: encodeNDList(withStrings), decode: decodeNDList },
  'npz (stored)': { bytes: encodeNpz(withStrings), decode: (bytes) => decodeNpz(bytes) },
  'npz (deflated)': {
    bytes: encodeNpz(withStrings, { compress: true }),
    decode: (bytes) => decodeNpz(bytes),
  },
  safetensors: { bytes: encodeSafetensors(numeric), decode: decodeSafetensors },
  'npy (float32)': { bytes: encodeNpy(numeric.get(0)), decode: (bytes) => decodeNpy(bytes) },
  'npy (strings)': { bytes: encodeNpy(strings), decode: (bytes) => decodeNpy(bytes) },
  json: {
    bytes: encodeTensors(withStrings, 'json').body,
    decode: (bytes) => decodeTensors(bytes, { contentType: 'application/json' }),
  },
  'v2 binary (FP32)': {
    bytes: encodeBinaryTensor(numeric.get(0)),
    decode: (bytes) => decodeBinaryTensor('FP32', [3], bytes),
  },
  'v2 binary (BYTES)': {
    bytes: encodeBinaryTensor(strings),
    decode: (bytes) => decodeBinaryTensor('BYTES', [3], bytes),
  },
};

describe.each(Object.entries(CASES))('%s against damaged input', (_, { bytes, decode }) => {
  it('decodes the intact encoding', () => {
    expect(() => decode(bytes)).not.toThrow();
  });

  it('rejects every truncation with a KilnError', () => {
    for (let length = 0; length < bytes.byteLength; length++) {
      expectKilnError(() => decode(bytes.slice(0, length)));
    }
  });

  it('answers random corruption with a result or a KilnError, nothing else', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(fc.nat({ max: bytes.byteLength - 1 }), fc.integer({ min: 0, max: 255 })),
          {
            minLength: 1,
            maxLength: 6,
          },
        ),
        (edits) => {
          const damaged = bytes.slice();
          for (const [at, value] of edits) damaged[at] = value;
          decodesOrKilnError(() => decode(damaged));
          decodesOrKilnError(() => decodeTensors(damaged));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('arbitrary bytes', () => {
  it('never make decodeTensors throw anything but a KilnError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) =>
        decodesOrKilnError(() => decodeTensors(bytes)),
      ),
      { numRuns: 1000 },
    );
  });

  it('behind each format magic never make decodeTensors throw anything but a KilnError', () => {
    const magics = [
      [0x50, 0x4b, 0x03, 0x04],
      [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0],
      [0x7b],
      [0x5b],
    ];
    fc.assert(
      fc.property(fc.constantFrom(...magics), fc.uint8Array({ maxLength: 200 }), (magic, rest) =>
        decodesOrKilnError(() => decodeTensors(Uint8Array.from([...magic, ...rest]))),
      ),
      { numRuns: 1000 },
    );
  });
});
