import { describe, expect, it } from 'vitest';
import { KilnErrorCode, NDList, Tensor } from '@kiln/core';
import {
  META_TENSOR,
  PythonBatchifier,
  PythonServingTranslator,
  metaTensor,
  readMeta,
  responseHeaders,
  splitMeta,
} from './serving.js';

const bytes = (text: string, name: string) => {
  const data = new TextEncoder().encode(text);
  return new Tensor('uint8', data, [data.length], name);
};

const request = (text: string, type: string) =>
  NDList.of(
    bytes(text, 'data'),
    metaTensor({ properties: { 'content-type': type }, bytes: ['data'] }),
  );

describe('PythonBatchifier', () => {
  it('prefixes each request, keeps its meta readable, and routes each answer back', () => {
    const batch = new PythonBatchifier().batchify([
      request('a', 'text/plain'),
      request('{"b":1}', 'application/json'),
    ]);
    const names = batch.input.tensors.map((t) => t.name);
    expect(names).toEqual([
      'batch_000_data',
      `batch_000_${META_TENSOR}`,
      'batch_001_data',
      `batch_001_${META_TENSOR}`,
      META_TENSOR,
    ]);
    // A copy of a prefixed meta (as another thread would get it) reads the same as the original.
    const prefixed = batch.input.tensors[3]!;
    const copy = new Tensor('string', [...(prefixed.data as string[])], [1], prefixed.name);
    expect(readMeta(copy)).toEqual(readMeta(prefixed));
    expect(readMeta(copy).properties['content-type']).toBe('application/json');
    expect(readMeta(batch.input.tensors[4]!).properties.batch_size).toBe('2');

    const answer = new NDList([
      bytes('first', 'batch_000_out'),
      bytes('second', 'batch_001_out'),
      metaTensor({
        properties: {
          code: '200',
          message: 'OK',
          model_version: '3',
          'batch_000_content-type': 'text/plain',
          batch_000_code: '200',
          'batch_001_content-type': 'application/json',
          batch_001_code: '404',
          batch_001_message: 'not here',
        },
        bytes: ['batch_000_out', 'batch_001_out'],
      }),
    ]);
    const [first, second] = batch.unbatchify(answer).map((list) => splitMeta(list));
    expect(first!.tensors.map((t) => t.name)).toEqual(['out']);
    expect(new TextDecoder().decode(first!.tensors[0]!.data as Uint8Array)).toBe('first');
    expect(first!.meta).toEqual({
      properties: { model_version: '3', 'content-type': 'text/plain', code: '200', message: 'OK' },
      bytes: ['out'],
    });
    expect(second!.meta).toEqual({
      properties: {
        model_version: '3',
        'content-type': 'application/json',
        code: '404',
        message: 'not here',
      },
      bytes: ['out'],
    });
  });

  it('refuses a batch answer whose contents are not named per request', () => {
    const batch = new PythonBatchifier().batchify([request('a', 'text/plain')]);
    const answer = NDList.of(bytes('x', 'out'), metaTensor({ properties: {}, bytes: ['out'] }));
    expect(() => batch.unbatchify(answer)).toThrow(
      expect.objectContaining({ code: KilnErrorCode.EngineError }),
    );
  });

  it('fails a request without meta on its own error code, and leaves answers to other indices out', () => {
    const batch = new PythonBatchifier().batchify([NDList.of(bytes('a', 'x'))]);
    const answer = NDList.of(
      bytes('mine', 'batch_000_y'),
      bytes('nobody', 'batch_005_y'),
      metaTensor({ properties: { batch_000_code: '200' }, bytes: [] }),
    );
    const [only, ...rest] = batch.unbatchify(answer);
    expect(rest).toEqual([]);
    expect(only!.tensors.map((t) => t.name)).toEqual(['y']);
    const failing = NDList.of(metaTensor({ properties: { batch_000_code: '500' }, bytes: [] }));
    expect(() => batch.unbatchify(failing)).toThrow(
      expect.objectContaining({ code: KilnErrorCode.EngineError }),
    );
  });

  it('fails every request of a batch the handler answered with an error as a whole', () => {
    const batch = new PythonBatchifier().batchify([request('a', 'text/plain'), request('b', 'x')]);
    const answer = NDList.of(
      metaTensor({ properties: { code: '503', message: 'warming up' }, bytes: [] }),
    );
    for (const list of batch.unbatchify(answer)) {
      expect(splitMeta(list).meta!.properties).toMatchObject({ code: '503' });
      expect(() => new PythonServingTranslator().processOutput({} as never, list)).toThrow(
        expect.objectContaining({ message: 'warming up', details: { code: 503, httpStatus: 503 } }),
      );
    }
  });
});

describe('PythonServingTranslator.processOutput', () => {
  it('answers 204 for a handler that returned None, for a request of a batch too', () => {
    const none = NDList.of(
      metaTensor({ properties: { code: '204', message: 'No content' }, bytes: [] }),
    );
    expect(new PythonServingTranslator().processOutput({} as never, none)).toEqual({
      type: 'json',
      value: null,
      status: 204,
    });
    const batch = new PythonBatchifier().batchify([request('a', 'text/plain'), request('b', 'x')]);
    const answer = NDList.of(
      bytes('"b"', 'batch_001_data'),
      metaTensor({
        properties: { code: '200', batch_000_code: '204', batch_001_code: '200' },
        bytes: ['batch_001_data'],
      }),
    );
    const [first, second] = batch.unbatchify(answer);
    const translator = new PythonServingTranslator();
    expect(translator.processOutput({} as never, first!)).toMatchObject({ status: 204 });
    expect(translator.processOutput({} as never, second!)).toEqual({ type: 'json', value: 'b' });
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
