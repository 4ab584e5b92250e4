import { describe, expect, it } from 'vitest';
import type { Model } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import type { Translator, TranslatorContext } from '../translate/translator.js';
import { servingPropertiesFrom } from '../loading/serving-properties.js';
import { RawTensorTranslator } from './raw-tensors.js';
import { withRawTensorPath } from './raw-tensor-path.js';

const model = {
  inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 2] }],
  outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 2] }],
  properties: servingPropertiesFrom({}),
} as unknown as Model;
const ctx: TranslatorContext = { model, arguments: {} };

/** Answers JSON, reading a body of two comma-separated numbers. */
const jsonTranslator: Translator<ServingInput, ServingOutput> = {
  batchifier: null,
  processInput: (_ctx, input) =>
    NDList.of(
      new Tensor(
        'float32',
        Float32Array.from(new TextDecoder().decode(input.body).split(',').map(Number)),
        [1, 2],
        'x',
      ),
    ),
  processOutput: (_ctx, output) => ({
    type: 'json',
    value: Array.from(output.get(0).data as Float32Array),
  }),
};

describe('withRawTensorPath', () => {
  const translator = withRawTensorPath(jsonTranslator);
  const tensors = NDList.of(new Tensor('float32', new Float32Array([3, 4]), [1, 2], 'x'));

  it('sends raw tensor inputs past the model translator, checked against the model', async () => {
    expect(
      (await translator.processInput(ctx, { tensors, rawTensors: true })).get('x').data,
    ).toEqual(new Float32Array([3, 4]));
    await expect(async () =>
      translator.processInput(ctx, {
        tensors: NDList.of(new Tensor('int32', new Int32Array(2), [1, 2], 'x')),
        rawTensors: true,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const output = await translator.processOutput(ctx, tensors, { tensors, rawTensors: true });
    expect(output).toMatchObject({ type: 'tensors' });
  });

  it("keeps the model translator's own path and batchifier for other inputs", async () => {
    const body = new TextEncoder().encode('1,2');
    const list = await translator.processInput(ctx, { body });
    expect(Array.from(list.get(0).data as Float32Array)).toEqual([1, 2]);
    expect(await translator.processOutput(ctx, list, { body })).toEqual({
      type: 'json',
      value: [1, 2],
    });
    expect(translator.batchifier).toBeNull();
  });

  it('keeps the batchifier of a raw tensor translator', () => {
    const raw = new RawTensorTranslator();
    expect(withRawTensorPath(raw).batchifier).toBe(raw.batchifier);
  });

  it('decodes a v2 infer body where it runs, and answers it as a v2 reply', async () => {
    const json = new TextEncoder().encode(
      JSON.stringify({
        id: 'r1',
        inputs: [{ name: 'x', shape: [1, 2], datatype: 'FP32', data: [5, 6] }],
      }),
    );
    const input: ServingInput = {
      body: json,
      v2: { headerLength: undefined, model: 'm', version: '2' },
      rawTensors: true,
    };
    const list = await translator.processInput(ctx, input);
    expect(Array.from(list.get('x').data as Float32Array)).toEqual([5, 6]);
    expect(await translator.processOutput(ctx, list, input)).toEqual({
      type: 'json',
      value: {
        model_name: 'm',
        model_version: '2',
        id: 'r1',
        outputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2], data: [5, 6] }],
      },
    });

    const header = new TextEncoder().encode(
      JSON.stringify({
        inputs: [
          { name: 'x', shape: [1, 2], datatype: 'FP32', parameters: { binary_data_size: 8 } },
        ],
        parameters: { binary_data_output: true },
      }),
    );
    const binary = new Uint8Array(header.byteLength + 8);
    binary.set(header);
    binary.set(new Uint8Array(Float32Array.of(7, 8).buffer), header.byteLength);
    const v2Binary: ServingInput = {
      body: binary,
      v2: { headerLength: String(header.byteLength), model: 'm', version: '' },
      rawTensors: true,
    };
    const reply = await translator.processOutput(
      ctx,
      await translator.processInput(ctx, v2Binary),
      v2Binary,
    );
    expect(reply).toMatchObject({
      type: 'bytes',
      contentType: 'application/octet-stream',
      headers: { 'inference-header-content-length': expect.any(String) },
    });

    await expect(async () =>
      translator.processInput(ctx, { ...input, body: new TextEncoder().encode('{') }),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT', message: 'request JSON is malformed' });
  });

  it('joins the tensor parts of a multipart request where it runs, named by their fields', async () => {
    const { encodeNpy } = await import('../codecs/npy.js');
    const part = (name: string, values: number[]) => ({
      name,
      contentType: 'application/x-npy',
      data: encodeNpy(new Tensor('float32', Float32Array.from(values), [1, 2])),
    });
    const list = await withRawTensorPath(new RawTensorTranslator()).processInput(
      { ...ctx, model: { ...model, inputs: [] } as unknown as Model },
      { parts: [part('a', [1, 2]), part('b', [3, 4])], rawTensors: true },
    );
    expect(list.names).toEqual(['a', 'b']);
  });
});
