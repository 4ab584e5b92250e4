import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import {
  type TensorFormat,
  detectTensorFormat,
  formatForAccept,
  formatForContentType,
  replyForAccept,
} from './detect.js';
import { decodeTensors, encodeTensors } from './tensor-codec.js';
import { expectKilnError, expectSameList } from './test-support.js';

const list = NDList.of(
  new Tensor('float32', Float32Array.of(1, 2), [2], 'x'),
  new Tensor('int8', Int8Array.of(3), [], 'y'),
);
const FORMATS: TensorFormat[] = ['npz', 'safetensors', 'ndlist', 'json'];
const ascii = (text: string) => new TextEncoder().encode(text);

describe('detectTensorFormat', () => {
  it.each(FORMATS)('recognizes its own %s encoding', (format) => {
    expect(detectTensorFormat(encodeTensors(list, format).body)).toBe(format);
  });

  it('recognizes npy, JSON after whitespace, and falls back to ndlist', () => {
    expect(detectTensorFormat(encodeTensors(NDList.of(list.get(0)), 'npy').body)).toBe('npy');
    expect(detectTensorFormat(ascii(' \n\t[1, 2]'))).toBe('json');
    expect(detectTensorFormat(ascii('{"inputs": []}'))).toBe('json');
    expect(detectTensorFormat(ascii('hello'))).toBe('ndlist');
    expect(detectTensorFormat(new Uint8Array(0))).toBe('ndlist');
    expect(detectTensorFormat(Uint8Array.of(0x50, 0x4b))).toBe('ndlist');
  });

  it('takes safetensors only when the declared header fits', () => {
    const fits = Uint8Array.of(2, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d);
    expect(detectTensorFormat(fits)).toBe('safetensors');
    const tooLong = Uint8Array.of(3, 0, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d);
    expect(detectTensorFormat(tooLong)).toBe('ndlist');
  });
});

describe('formatForAccept', () => {
  it.each([
    [undefined, 'ndlist'],
    ['', 'ndlist'],
    ['*/*', 'ndlist'],
    ['text/html', 'ndlist'],
    ['tensor/npz', 'npz'],
    ['TENSOR/SAFETENSORS', 'safetensors'],
    ['application/json; charset=utf-8', 'json'],
    ['tensor/ndlist', 'ndlist'],
    ['tensor/npy', 'npy'],
    ['tensor/npz;q=0.5, application/json', 'json'],
    ['tensor/npz;q=0.9, application/json;q=0.8', 'npz'],
    ['application/json;q=0, tensor/npz;q=0.1', 'npz'],
    ['application/json;q=0', 'ndlist'],
    ['tensor/safetensors, tensor/npz', 'safetensors'],
    ['application/json;q=2', 'ndlist'],
  ] as const)('%j → %s', (accept, format) => {
    expect(formatForAccept(accept)).toBe(format);
  });

  it('takes numpy’s media types for npy and npz, and answers under the one asked for', () => {
    expect(formatForContentType('application/x-npy')).toBe('npy');
    expect(formatForContentType('Application/X-NPZ; charset=binary')).toBe('npz');
    expect(replyForAccept('application/x-npy', 1)).toEqual({
      format: 'npy',
      contentType: 'application/x-npy',
    });
    expect(replyForAccept('Application/X-Npz;q=0.9, tensor/npy;q=0.5', 1)).toEqual({
      format: 'npz',
      contentType: 'application/x-npz',
    });
    expect(replyForAccept('tensor/npy', 1)).toEqual({ format: 'npy', contentType: 'tensor/npy' });
    // npy cannot hold two tensors: the default answers, under its own type.
    expect(replyForAccept('application/x-npy', 2)).toEqual({
      format: 'ndlist',
      contentType: 'tensor/ndlist',
    });
  });

  it('answers an npz or safetensors request in kind when Accept names no tensor format', () => {
    expect(replyForAccept(undefined, 2, 'tensor/npz')).toEqual({
      format: 'npz',
      contentType: 'tensor/npz',
    });
    expect(replyForAccept('*/*', 1, 'application/x-npz')).toEqual({
      format: 'npz',
      contentType: 'application/x-npz',
    });
    expect(replyForAccept(undefined, 1, 'tensor/safetensors')).toEqual({
      format: 'safetensors',
      contentType: 'tensor/safetensors',
    });
    // Accept wins; other request types get DJL's default.
    expect(replyForAccept('tensor/ndlist', 1, 'tensor/npz').format).toBe('ndlist');
    expect(replyForAccept(undefined, 1, 'tensor/npy').format).toBe('ndlist');
    expect(replyForAccept(undefined, 1, 'application/json').format).toBe('ndlist');
  });

  it('passes npy over for anything but one tensor', () => {
    expect(formatForAccept('tensor/npy, tensor/npz;q=0.5', 1)).toBe('npy');
    expect(formatForAccept('tensor/npy, tensor/npz;q=0.5', 2)).toBe('npz');
    expect(formatForAccept('tensor/npy', 3)).toBe('ndlist');
  });
});

describe('decodeTensors / encodeTensors', () => {
  it.each(FORMATS)('round-trips through %s with its content type', (format) => {
    const { body, contentType } = encodeTensors(list, format);
    expect(contentType).toBe(format === 'json' ? 'application/json' : `tensor/${format}`);
    expectSameList(decodeTensors(body, { contentType }), list);
    expectSameList(decodeTensors(body), list);
  });

  it('encodes one tensor as npy and refuses npy for several', () => {
    const single = NDList.of(list.get(0));
    const { body, contentType } = encodeTensors(single, 'npy');
    expect(contentType).toBe('tensor/npy');
    expect(decodeTensors(body).get(0).data).toEqual(Float32Array.of(1, 2));
    expectKilnError(() => encodeTensors(list, 'npy'), [KilnErrorCode.InvalidInput]);
  });

  it('deflates npz on request', () => {
    const zeros = NDList.of(new Tensor('float32', new Float32Array(10_000), [10_000]));
    expect(encodeTensors(zeros, 'npz', { compress: true }).body.byteLength).toBeLessThan(
      encodeTensors(zeros, 'npz').body.byteLength / 10,
    );
  });

  it('lets a content type that names a format win over detection', () => {
    const json = ascii('[[1, 2]]');
    expect(decodeTensors(json).get(0).shape).toEqual([1, 2]);
    expectKilnError(
      () => decodeTensors(json, { contentType: 'tensor/ndlist' }),
      [KilnErrorCode.MalformedTensor],
    );
    expect(decodeTensors(json, { contentType: 'application/octet-stream' }).get(0).shape).toEqual([
      1, 2,
    ]);
    expect(decodeTensors(json, { contentType: 'Application/JSON; charset=utf-8' }).length).toBe(1);
  });

  it('names an image sent where tensors are expected, instead of misreading it as ndlist', () => {
    const jpeg = Uint8Array.of(0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0, 1);
    const png = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d);
    for (const [body, contentType] of [
      [jpeg, 'image/jpeg'],
      [jpeg, undefined],
      [png, 'application/octet-stream'],
    ] as const) {
      const error = expectKilnError(
        () => decodeTensors(body, contentType ? { contentType } : {}),
        [KilnErrorCode.UnsupportedFormat],
      );
      expect(error.message).toMatch(
        /^the body is a (JPEG|PNG) image, but this model takes tensors/,
      );
      expect(error.message).toContain('send npy, npz');
      expect(error.message).toContain('translatorFactory');
    }
  });

  it('enforces maxBytes on the body and on what npz inflates to', () => {
    const { body } = encodeTensors(list, 'ndlist');
    expectKilnError(
      () => decodeTensors(body, { maxBytes: body.byteLength - 1 }),
      [KilnErrorCode.PayloadTooLarge],
    );
    const zeros = encodeTensors(
      NDList.of(new Tensor('uint8', new Uint8Array(1_000_000), [1_000_000])),
      'npz',
      {
        compress: true,
      },
    );
    expectKilnError(
      () => decodeTensors(zeros.body, { maxBytes: 100_000 }),
      [KilnErrorCode.PayloadTooLarge],
    );
  });

  it('rejects invalid JSON bodies as MALFORMED_TENSOR', () => {
    expectKilnError(() => decodeTensors(ascii('[1, 2')), [KilnErrorCode.MalformedTensor]);
    expectKilnError(
      () => decodeTensors(Uint8Array.of(0x5b, 0xff, 0x5d)),
      [KilnErrorCode.MalformedTensor],
    );
  });
});
