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

  it('leaves a raw tensor translator as it is', () => {
    const raw = new RawTensorTranslator();
    expect(withRawTensorPath(raw)).toBe(raw);
  });
});
