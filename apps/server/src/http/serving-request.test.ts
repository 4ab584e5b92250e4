import { describe, expect, it } from 'vitest';
import { NDList, Tensor } from '@kiln/core';
import { servingAnswer } from './serving-request.js';

describe('servingAnswer', () => {
  const headers = { 'x-model-version': '3' };

  it("keeps a model's own headers on JSON, tensor and byte answers", () => {
    expect(servingAnswer({ type: 'json', value: { a: 1 }, headers }, undefined)).toMatchObject({
      contentType: 'application/json',
      headers,
    });
    const tensors = NDList.of(new Tensor('float32', new Float32Array([1, 2]), [2]));
    const npy = servingAnswer({ type: 'tensors', tensors, headers }, 'application/x-npy');
    expect(npy).toMatchObject({ contentType: 'application/x-npy', headers });
    const bytes = new Uint8Array([1, 2, 3]);
    expect(
      servingAnswer({ type: 'bytes', body: bytes, contentType: 'image/png', headers }, undefined),
    ).toMatchObject({ contentType: 'image/png', headers });
  });

  it("answers 204 for a model that answered nothing, a handler's own code, 200 otherwise", () => {
    expect(servingAnswer({ type: 'json', value: null, status: 204 }, undefined).status).toBe(204);
    expect(servingAnswer({ type: 'json', value: null }, undefined).status).toBe(200);
    expect(
      servingAnswer({ type: 'json', value: { code: 424 }, status: 424 }, undefined),
    ).toMatchObject({ status: 424, contentType: 'application/json' });
  });

  it('leaves bytes the model did not label without a content type', () => {
    const answer = servingAnswer(
      { type: 'bytes', body: new Uint8Array([0, 1]), contentType: undefined },
      undefined,
    );
    expect(answer.contentType).toBeUndefined();
  });

  it('answers tensors in the format of an npz request when Accept names none', () => {
    const tensors = NDList.of(new Tensor('float32', new Float32Array([1, 2]), [2]));
    expect(servingAnswer({ type: 'tensors', tensors }, undefined, 'tensor/npz').contentType).toBe(
      'tensor/npz',
    );
    expect(
      servingAnswer({ type: 'tensors', tensors }, 'tensor/ndlist', 'tensor/npz').contentType,
    ).toBe('tensor/ndlist');
  });

  it('sends only the headers and content type that are valid HTTP', () => {
    const answer = servingAnswer(
      {
        type: 'bytes',
        body: new Uint8Array([1]),
        contentType: 'image/png\r\nx-evil: 1',
        headers: { 'x-ok': '1', 'x-bad': 'a\nb', 'content-length': '9' },
      },
      undefined,
    );
    expect(answer).toMatchObject({
      contentType: 'application/octet-stream',
      headers: { 'x-ok': '1' },
    });
  });

  it('carries no headers object for answers without headers of their own', () => {
    expect(servingAnswer({ type: 'json', value: null }, undefined).headers).toBeUndefined();
  });
});
