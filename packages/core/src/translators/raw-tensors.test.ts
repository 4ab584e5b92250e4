import { describe, expect, it } from 'vitest';
import { encodeTensors } from '../codecs/index.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { Predictor } from '../translate/predictor.js';
import { doublingModel } from '../translate/test-support.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import { RawTensorTranslator } from './raw-tensors.js';

const rows = (...values: number[]) =>
  new Tensor('float32', Float32Array.from(values), [values.length / 2, 2]);

function tensorsOf(output: ServingOutput): NDList {
  if (output.type !== 'tensors') throw new Error(`expected tensors, got ${output.type}`);
  return output.tensors;
}

describe('RawTensorTranslator', () => {
  it('round-trips an npy body and names the output after the model', async () => {
    const predictor = await Predictor.create(doublingModel([], 2), new RawTensorTranslator());
    try {
      const { body, contentType } = encodeTensors(NDList.of(rows(1, 2, 3, 4)), 'npy');
      const out = tensorsOf(await predictor.predict({ body, contentType }));
      expect(out.names).toEqual(['y']);
      expect(out.get(0).shape).toEqual([2, 2]);
      expect(Array.from(out.get(0).data as Float32Array)).toEqual([2, 4, 6, 8]);
    } finally {
      await predictor.close();
    }
  });

  it('decodes v2 JSON tensors by content type and detects other formats from the bytes', async () => {
    const predictor = await Predictor.create(doublingModel([], 2), new RawTensorTranslator());
    try {
      const json = JSON.stringify({
        inputs: [{ name: 'x', shape: [1, 2], datatype: 'FP32', data: [0.5, -1] }],
      });
      const fromJson = tensorsOf(
        await predictor.predict({
          body: new TextEncoder().encode(json),
          contentType: 'application/json',
        }),
      );
      expect(Array.from(fromJson.get('y').data as Float32Array)).toEqual([1, -2]);
      for (const format of ['npz', 'safetensors', 'ndlist'] as const) {
        const { body } = encodeTensors(NDList.of(rows(5, 6).withName('x')), format);
        const out = tensorsOf(await predictor.predict({ body }));
        expect(Array.from(out.get('y').data as Float32Array)).toEqual([10, 12]);
      }
    } finally {
      await predictor.close();
    }
  });

  it('takes tensors the protocol already carried, and batches requests by stacking', async () => {
    const forwards: number[] = [];
    const predictor = await Predictor.create<ServingInput, ServingOutput>(
      doublingModel(forwards, 2),
      new RawTensorTranslator(),
    );
    try {
      const results = await predictor.batchPredictSettled([
        { tensors: NDList.of(rows(1, 1)) },
        { tensors: NDList.of(new Tensor('int32', Int32Array.of(1, 2), [1, 2], 'x')) },
        { tensors: NDList.of(rows(2, 2, 3, 3).withName('x')) },
        { tensors: NDList.of(new Tensor('float32', Float32Array.of(1, 2, 3), [1, 3])) },
      ]);
      expect(forwards).toEqual([3]);
      const [first, badType, third, badShape] = results;
      expect(first).toMatchObject({ ok: true });
      expect(
        Array.from(
          tensorsOf((first as { value: ServingOutput }).value).get('y').data as Float32Array,
        ),
      ).toEqual([2, 2]);
      expect(
        Array.from(
          tensorsOf((third as { value: ServingOutput }).value).get('y').data as Float32Array,
        ),
      ).toEqual([4, 4, 6, 6]);
      expect(badType).toMatchObject({
        ok: false,
        error: { code: 'INVALID_INPUT', message: 'input x expects float32, got int32' },
      });
      expect(badShape).toMatchObject({ ok: false, error: { code: 'SHAPE_MISMATCH' } });
    } finally {
      await predictor.close();
    }
  });

  it('refuses empty, malformed and oversized bodies', async () => {
    const model = doublingModel([], 2);
    const ctx = { model, arguments: {} };
    expect(() => new RawTensorTranslator().processInput(ctx, { body: new Uint8Array(0) })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    expect(() =>
      new RawTensorTranslator().processInput(ctx, {
        body: new TextEncoder().encode('{"inputs": 3}'),
      }),
    ).toThrow(expect.objectContaining({ code: 'MALFORMED_TENSOR' }));
    const { body } = encodeTensors(NDList.of(rows(1, 2)), 'npy');
    expect(() => new RawTensorTranslator({ maxBytes: 16 }).processInput(ctx, { body })).toThrow(
      expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }),
    );
  });

  it('keeps output names the engine already set', () => {
    const model = doublingModel([], 2);
    const out = new RawTensorTranslator().processOutput(
      { model, arguments: {} },
      NDList.of(rows(1, 2).withName('logits'), rows(3, 4)),
    );
    expect(tensorsOf(out).names).toEqual(['logits', undefined]);
  });
});
