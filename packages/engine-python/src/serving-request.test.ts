import { describe, expect, it } from 'vitest';
import { KilnErrorCode, NDList, Tensor } from '@kiln/core';
import { outputOf, requestOf, responseHeaders } from './serving.js';

const text = (value: string) => new TextEncoder().encode(value);

describe('requestOf: a request as the handler gets it', () => {
  it("has the headers as properties and, as DJL's RequestParser, each query parameter then the body as contents", () => {
    const body = text('{"a":1}');
    const request = requestOf({
      body,
      contentType: 'application/json',
      headers: { 'x-trace': 'abc', batch_size: '3' },
      query: [
        ['stream', 'true'],
        ['stream', 'false'],
      ],
    });
    // A client's header cannot make its request look like a batch.
    expect(request.properties).toEqual({ 'x-trace': 'abc', 'content-type': 'application/json' });
    expect(request.contents.map((c) => [c.name, new TextDecoder().decode(c.bytes)])).toEqual([
      ['stream', 'true'],
      ['stream', 'false'],
      ['data', '{"a":1}'],
    ]);
    // The body itself, not a copy.
    expect(request.contents[2]!.bytes).toBe(body);
  });

  it('names the body by its form field, and each multipart part by its own', () => {
    expect(requestOf({ body: text('boom'), field: 'exception' }).contents[0]!.name).toBe(
      'exception',
    );
    const parts = [
      { name: 'image', data: new Uint8Array(5), contentType: 'image/png' },
      { name: 'meta', data: text('{}'), contentType: undefined },
    ];
    expect(requestOf({ parts }).contents.map((c) => c.name)).toEqual(['image', 'meta']);
  });

  it('hands raw tensors over as tensors, with no properties', () => {
    const x = new Tensor('float32', new Float32Array([1, 2]), [2], 'x');
    const request = requestOf({ tensors: NDList.of(x), rawTensors: true, headers: { a: 'b' } });
    expect(request).toMatchObject({ properties: {}, raw: true });
    expect(request.contents[0]).toMatchObject({ name: 'x', dtype: 'float32', shape: [2] });
  });

  it('refuses a request without a body', () => {
    expect(() => requestOf({})).toThrow(/no body/);
  });
});

describe('outputOf: an Output as the response', () => {
  const request = requestOf({ body: text('x') });

  it('answers 204 for a handler that returned None', () => {
    expect(outputOf(request, { code: 204, message: 'No content' }, [])).toEqual({
      ok: true,
      value: { type: 'json', value: null, status: 204 },
    });
  });

  it("fails on the handler's code ≥ 400 with its message", () => {
    const result = outputOf(request, { code: 422, message: 'x is missing' }, []);
    expect(result).toMatchObject({
      ok: false,
      error: { code: KilnErrorCode.InvalidInput, message: 'x is missing' },
    });
  });

  it('sends a body that comes with a code ≥ 400 as it is, with that status, as DJL does', () => {
    const body = text('{"code":424,"message":"prediction failure","error":"no"}');
    const result = outputOf(
      request,
      { code: 424, message: 'prediction failure: no', 'content-type': 'application/json' },
      [{ name: 'data', bytes: body }],
    );
    expect(result).toEqual({
      ok: true,
      value: {
        type: 'json',
        value: { code: 424, message: 'prediction failure', error: 'no' },
        status: 424,
      },
    });
  });

  it('sends bytes without a content type unlabelled, whether or not they are text', () => {
    for (const bytes of [text('hello'), new Uint8Array([0xff, 0, 1])]) {
      expect(outputOf(request, { code: 200 }, [{ name: 'data', bytes }])).toEqual({
        ok: true,
        value: { type: 'bytes', body: bytes, contentType: undefined },
      });
    }
  });

  it('answers a JSON body as JSON with its own properties as headers, tensors as tensors', () => {
    const json = outputOf(
      request,
      { code: 200, 'content-type': 'application/json', 'X-Model': '3' },
      [{ name: 'data', bytes: text('{"y":2}') }],
    );
    expect(json).toEqual({
      ok: true,
      value: { type: 'json', value: { y: 2 }, headers: { 'x-model': '3' } },
    });
    const bytes = new Uint8Array(new Float32Array([4]).buffer);
    const tensors = outputOf(request, { code: 200 }, [
      { name: 'y', bytes, dtype: 'float32', shape: [1] },
    ]);
    expect(
      tensors.ok && tensors.value.type === 'tensors' && tensors.value.tensors.get(0).data,
    ).toEqual(new Float32Array([4]));
  });
});

describe('responseHeaders', () => {
  it("sends the handler's own properties, not the answer's or Kiln's", () => {
    expect(
      responseHeaders({
        'content-type': 'application/json',
        code: '200',
        message: 'OK',
        kiln_handler_us: '12',
        'X-Model-Version': '3',
        'Cache-Control': 'no-store',
      }),
    ).toEqual({ 'x-model-version': '3', 'cache-control': 'no-store' });
    expect(responseHeaders({ code: '200', message: 'OK' })).toBeUndefined();
  });
});
