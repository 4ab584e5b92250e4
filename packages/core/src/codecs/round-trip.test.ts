import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DTYPES, type DType } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import { decodeNDList, encodeNDList } from './ndlist.js';
import { decodeNpy, encodeNpy } from './npy.js';
import { decodeNpz, encodeNpz } from './npz.js';
import { decodeSafetensors, encodeSafetensors } from './safetensors.js';
import { decodeTensors, encodeTensors } from './tensor-codec.js';
import {
  defaultNames,
  expectSameList,
  expectSameTensor,
  jsonValues,
  largeTensor,
  listArb,
  tensorArb,
} from './test-support.js';
import { decodeBinaryTensor, encodeBinaryTensor } from './v2-binary.js';

const RUNS = { numRuns: 60 };
const NO_BFLOAT16 = DTYPES.filter((dtype) => dtype !== 'bfloat16');
const NUMERIC = DTYPES.filter((dtype) => dtype !== 'string');

interface ListCodec {
  dtypes: readonly DType[];
  encode(list: NDList): Uint8Array;
  decode(bytes: Uint8Array): NDList;
  /** Names the decoded tensors carry, given the encoded list. */
  names(list: NDList): (string | undefined)[];
  /** numpy's fixed-width strings treat trailing NULs as padding, so such strings cannot survive. */
  dropsTrailingNul?: boolean;
}

const endsInNul = (list: NDList) =>
  list.tensors.some(
    (t) => t.dtype === 'string' && (t.data as string[]).some((s) => s.endsWith('\0')),
  );

const LIST_CODECS: Record<string, ListCodec> = {
  ndlist: {
    dtypes: DTYPES,
    encode: encodeNDList,
    decode: decodeNDList,
    names: (list) => list.names,
  },
  'npz (stored)': {
    dtypes: NO_BFLOAT16,
    encode: (list) => encodeNpz(list),
    decode: (bytes) => decodeNpz(bytes),
    names: defaultNames,
    dropsTrailingNul: true,
  },
  'npz (deflated)': {
    dtypes: NO_BFLOAT16,
    encode: (list) => encodeNpz(list, { compress: true }),
    decode: (bytes) => decodeNpz(bytes),
    names: defaultNames,
    dropsTrailingNul: true,
  },
  safetensors: {
    dtypes: NUMERIC,
    encode: (list) => encodeSafetensors(list),
    decode: decodeSafetensors,
    names: defaultNames,
  },
};

describe.each(Object.entries(LIST_CODECS))('%s round trip', (_, codec) => {
  for (const naming of ['named', 'unnamed', 'mixed'] as const) {
    it(`keeps every supported dtype and odd shape exactly (${naming} lists)`, () => {
      fc.assert(
        fc.property(listArb(codec.dtypes, naming), (list) => {
          fc.pre(!codec.dropsTrailingNul || !endsInNul(list));
          expectSameList(codec.decode(codec.encode(list)), list, codec.names(list));
        }),
        RUNS,
      );
    });
  }

  it('round-trips a ~1M-element tensor', () => {
    const list = NDList.of(largeTensor('big'));
    expectSameList(codec.decode(codec.encode(list)), list);
  });

  it('round-trips an empty list', () => {
    expect(codec.decode(codec.encode(new NDList())).length).toBe(0);
  });
});

describe('npy round trip', () => {
  it('keeps every numpy dtype and odd shape exactly', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...NO_BFLOAT16).chain((dtype) => tensorArb(dtype)),
        (tensor) => {
          fc.pre(!endsInNul(NDList.of(tensor)));
          expectSameTensor(decodeNpy(encodeNpy(tensor)), tensor);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('round-trips a ~1M-element tensor', () => {
    const tensor = largeTensor();
    expectSameTensor(decodeNpy(encodeNpy(tensor)), tensor);
  });
});

describe('v2 binary round trip', () => {
  it('keeps every dtype and odd shape exactly', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...DTYPES).chain((dtype) => tensorArb(dtype)),
        (tensor) => {
          const bytes = encodeBinaryTensor(tensor);
          expectSameTensor(decodeBinaryTensor(tensor.dtype, tensor.shape, bytes), tensor);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('round-trips a ~1M-element tensor', () => {
    const tensor = largeTensor();
    expectSameTensor(decodeBinaryTensor('FP32', tensor.shape, encodeBinaryTensor(tensor)), tensor);
  });
});

describe('JSON round trip', () => {
  it('keeps every dtype and odd shape, up to what JSON numbers can say', () => {
    fc.assert(
      fc.property(listArb(DTYPES, 'mixed'), (list) => {
        const { body, contentType } = encodeTensors(list, 'json');
        const decoded = decodeTensors(body, { contentType });
        expect(decoded.names).toEqual(defaultNames(list));
        list.tensors.forEach((tensor, i) => {
          const got = decoded.get(i);
          expect(got.dtype).toBe(tensor.dtype);
          expect(got.shape).toEqual(tensor.shape);
          expect(jsonValues(got)).toEqual(jsonValues(tensor));
        });
      }),
      RUNS,
    );
  });

  it('round-trips a ~1M-element tensor', () => {
    const tensor = largeTensor('big');
    const { body } = encodeTensors(NDList.of(tensor), 'json');
    expectSameTensor(decodeTensors(body).get(0), tensor);
  });
});
