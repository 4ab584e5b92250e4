import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CPU } from '../engine/device.js';
import type { ExecutionContext } from '../engine/execution.js';
import { KilnError } from '../errors.js';
import { servingPropertiesFrom } from '../loading/serving-properties.js';
import type { Model, TensorDescriptor } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { Predictor } from '../translate/predictor.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import type { TranslatorContext } from '../translate/translator.js';
import { ImageClassificationTranslator } from './image-classification.js';

const SQUEEZENET_DIR = path.resolve(
  import.meta.dirname,
  '../../../../../shared/models/squeezenet1_1',
);

type Pixel = (x: number, y: number) => [number, number, number];

function rgba(width: number, height: number, pixel: Pixel): Buffer {
  const data = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) data.set([...pixel(x, y), 255], (y * width + x) * 4);
  return data;
}

function png(width: number, height: number, pixel: Pixel): Uint8Array {
  const image = new PNG({ width, height });
  image.data = rgba(width, height, pixel);
  return PNG.sync.write(image);
}

function jpg(width: number, height: number, pixel: Pixel): Uint8Array {
  return jpeg.encode({ width, height, data: rgba(width, height, pixel) }, 95).data;
}

/**
 * A model whose forward scores three classes (red, green, blue) by the mean of each channel
 * of an NCHW image batch: enough to drive the translator end to end.
 */
function channelMeanModel(
  modelDir: string,
  raw: Record<string, string> = {},
  inputs?: TensorDescriptor[],
): Model {
  const context: ExecutionContext = {
    async forward(input) {
      const images = input.get(0);
      const [batch, channels, height, width] = images.shape as number[];
      const plane = height! * width!;
      const scores = new Float32Array(batch! * channels!);
      const data = images.data as Float32Array;
      for (let i = 0; i < scores.length; i++) {
        let sum = 0;
        for (let p = 0; p < plane; p++) sum += data[i * plane + p]!;
        scores[i] = sum / plane;
      }
      return NDList.of(new Tensor('float32', scores, [batch!, channels!], 'scores'));
    },
    async close() {},
  };
  return {
    name: 'channel-mean',
    engine: 'test',
    device: CPU,
    modelDir,
    inputs: inputs ?? [{ name: 'image', dtype: 'float32', shape: [-1, 3, 8, 8] }],
    outputs: [{ name: 'scores', dtype: 'float32', shape: [-1, 3] }],
    properties: servingPropertiesFrom(raw),
    describe: () => ({}),
    newExecutionContext: async () => context,
    dispose: async () => {},
  };
}

/** The image tensor a processInput call produced. */
function imageTensor(list: NDList): Tensor<'float32'> {
  return list.get(0) as Tensor<'float32'>;
}

function ctx(model: Model): TranslatorContext {
  return { model, arguments: model.properties.raw };
}

async function inputError(
  translator: ImageClassificationTranslator,
  model: Model,
  input: ServingInput,
): Promise<KilnError> {
  try {
    translator.processInput(ctx(model), input);
  } catch (error) {
    if (error instanceof KilnError) return error;
    throw error;
  }
  throw new Error('expected processInput to fail');
}

describe('ImageClassificationTranslator', () => {
  let modelDir: string;
  beforeAll(async () => {
    modelDir = await mkdtemp(path.join(tmpdir(), 'kiln-image-'));
    await writeFile(
      path.join(modelDir, 'synset.txt'),
      'n00000001 red thing\nn00000002 green thing\nblue thing\n',
    );
  });
  afterAll(async () => {
    await rm(modelDir, { recursive: true, force: true });
  });

  it('takes its size from the model and names the tensor after the model input', async () => {
    const model = channelMeanModel(modelDir);
    const translator = await ImageClassificationTranslator.forModel(model);
    const tensor = imageTensor(
      translator.processInput(ctx(model), { body: png(40, 30, () => [255, 128, 0]) }),
    );
    expect(tensor.name).toBe('image');
    expect(tensor.dtype).toBe('float32');
    expect(tensor.shape).toEqual([1, 3, 8, 8]);
    // A solid image stays solid through resize and crop; only the normalisation is left.
    const expected = [255, 128, 0].map(
      (v, c) => (v / 255 - [0.485, 0.456, 0.406][c]!) / [0.229, 0.224, 0.225][c]!,
    );
    for (let c = 0; c < 3; c++) {
      expect(tensor.data[c * 64]).toBeCloseTo(expected[c]!, 5);
      expect(tensor.data[c * 64 + 63]).toBeCloseTo(expected[c]!, 5);
    }
  });

  it('reads every pre-processing argument', async () => {
    const model = channelMeanModel(modelDir, {}, []);
    const args = {
      width: '2',
      height: '2',
      resize: 'false',
      channels: 'BGR',
      range: '0-255',
      normalize: 'false',
      layout: 'NHWC',
    };
    const translator = await ImageClassificationTranslator.forModel(model, args);
    const tensor = imageTensor(
      translator.processInput(ctx(model), {
        body: png(2, 2, (x, y) => [10 * x + 40 * y, 1 + x, 200 + y]),
      }),
    );
    expect(tensor.name).toBeUndefined();
    expect(tensor.shape).toEqual([1, 2, 2, 3]);
    expect(Array.from(tensor.data)).toEqual([200, 1, 0, 200, 2, 10, 201, 1, 40, 201, 2, 50]);
  });

  it('decodes JPEG bodies', async () => {
    const model = channelMeanModel(modelDir);
    const translator = await ImageClassificationTranslator.forModel(model, { range: '0-255' });
    const tensor = imageTensor(
      translator.processInput(ctx(model), { body: jpg(20, 20, () => [30, 160, 220]) }),
    );
    [30, 160, 220].forEach((v, c) =>
      expect(Math.abs(tensor.data[c * 64 + 27]! - v)).toBeLessThanOrEqual(3),
    );
  });

  it('accepts an already decoded uint8 [H,W,C] tensor', async () => {
    const model = channelMeanModel(modelDir);
    const translator = await ImageClassificationTranslator.forModel(model, { range: '0-255' });
    const pixels = new Tensor(
      'uint8',
      new Uint8Array(4 * 4 * 3).fill(0).map((_, i) => [9, 99, 199][i % 3]!),
      [1, 4, 4, 3],
    );
    const tensor = imageTensor(translator.processInput(ctx(model), { tensors: NDList.of(pixels) }));
    expect([tensor.data[0], tensor.data[64], tensor.data[128]]).toEqual([9, 99, 199]);
  });

  it('answers INVALID_INPUT for corrupt, non-image and wrongly typed inputs', async () => {
    const model = channelMeanModel(modelDir);
    const translator = await ImageClassificationTranslator.forModel(model);
    const good = png(8, 8, () => [1, 2, 3]);
    const bodies = [
      new TextEncoder().encode('{"data": [1, 2, 3]}'),
      good.subarray(0, 40),
      new Uint8Array(0),
    ];
    for (const body of bodies) {
      const error = await inputError(translator, model, { body });
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/JPEG|PNG/);
    }
    const floats = NDList.of(new Tensor('float32', new Float32Array(12), [2, 2, 3]));
    expect((await inputError(translator, model, { tensors: floats })).message).toContain(
      'uint8 [height,width,channels]',
    );
  });

  it('refuses at load time a model that cannot take the image tensor', async () => {
    const twoInputs = channelMeanModel(modelDir, {}, [
      { name: 'a', dtype: 'float32', shape: [-1, 3, 8, 8] },
      { name: 'b', dtype: 'float32', shape: [-1, 3, 8, 8] },
    ]);
    await expect(ImageClassificationTranslator.forModel(twoInputs)).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
    const bytes = channelMeanModel(modelDir, {}, [
      { name: 'a', dtype: 'uint8', shape: [-1, 3, 8, 8] },
    ]);
    await expect(ImageClassificationTranslator.forModel(bytes)).rejects.toThrow(
      /uint8\[-1,3,8,8\].*float32\[1,3,8,8\]/,
    );
    await expect(
      ImageClassificationTranslator.forModel(channelMeanModel(modelDir), { width: '9' }),
    ).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('returns the top classes with labels from synset.txt', async () => {
    const model = channelMeanModel(modelDir);
    const translator = await ImageClassificationTranslator.forModel(model, { topK: '2' });
    const logits = NDList.of(new Tensor('float32', new Float32Array([0, 2, 1]), [1, 3]));
    const output = translator.processOutput(ctx(model), logits);
    const sum = 1 + Math.exp(2) + Math.exp(1);
    expect(output.type).toBe('json');
    const value = (output as { value: { className: string; probability: number }[] }).value;
    expect(value.map((c) => c.className)).toEqual(['green thing', 'blue thing']);
    expect(value[0]!.probability).toBeCloseTo(Math.exp(2) / sum, 6);
    expect(value[1]!.probability).toBeCloseTo(Math.exp(1) / sum, 6);
  });

  it('labels classes by index when the model has no synset.txt', async () => {
    const bare = await mkdtemp(path.join(tmpdir(), 'kiln-image-bare-'));
    try {
      const model = channelMeanModel(bare);
      const translator = await ImageClassificationTranslator.forModel(model, {
        applySoftmax: 'false',
      });
      const output = translator.processOutput(
        ctx(model),
        NDList.of(new Tensor('float32', new Float32Array([5, 9, 7]), [1, 3])),
      );
      expect(output).toEqual({
        type: 'json',
        value: [
          { className: '1', probability: 9 },
          { className: '2', probability: 7 },
          { className: '0', probability: 5 },
        ],
      });
    } finally {
      await rm(bare, { recursive: true, force: true });
    }
  });

  it('classifies a batch of images through a Predictor, one result per image', async () => {
    const model = channelMeanModel(modelDir);
    const translator = await ImageClassificationTranslator.forModel(model, {
      range: '0-255',
      topK: '1',
      applySoftmax: 'false',
    });
    const predictor = await Predictor.create<ServingInput, ServingOutput>(model, translator);
    try {
      const results = await predictor.batchPredictSettled([
        { body: png(12, 10, () => [250, 10, 10]) },
        { body: new TextEncoder().encode('not an image') },
        { body: jpg(16, 16, () => [5, 5, 240]) },
      ]);
      expect(results[0]).toMatchObject({
        ok: true,
        value: { type: 'json', value: [{ className: 'red thing' }] },
      });
      expect(results[1]).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' } });
      expect(results[2]).toMatchObject({
        ok: true,
        value: { type: 'json', value: [{ className: 'blue thing' }] },
      });
    } finally {
      await predictor.close();
    }
  });

  it('matches the PNG bytes with squeezenet1_1 conventions (BGR, 0..255, no resize)', async (test) => {
    if (!existsSync(SQUEEZENET_DIR)) {
      console.warn(
        `skipping the squeezenet1_1 preprocessing check: ${SQUEEZENET_DIR} does not exist`,
      );
      test.skip(`${SQUEEZENET_DIR} does not exist`);
    }
    const input: TensorDescriptor = { name: 'data_0', dtype: 'float32', shape: [-1, 3, 224, 224] };
    const model = { ...channelMeanModel(SQUEEZENET_DIR, {}, [input]), name: 'squeezenet1_1' };
    const args = {
      channels: 'BGR',
      range: '0-255',
      normalize: 'false',
      resize: 'false',
      centerCrop: 'false',
    };
    const translator = await ImageClassificationTranslator.forModel(model, args);
    expect(translator.labels).toHaveLength(1000);
    expect(translator.labels[0]).toBe('tench, Tinca tinca');

    const body = await readFile(path.join(SQUEEZENET_DIR, 'images/kitten_224.png'));
    const tensor = imageTensor(translator.processInput(ctx(model), { body }));
    expect(tensor.name).toBe('data_0');
    expect(tensor.dtype).toBe('float32');
    expect(tensor.shape).toEqual([1, 3, 224, 224]);

    const reference = PNG.sync.read(body).data;
    const plane = 224 * 224;
    expect([tensor.data[0], tensor.data[plane], tensor.data[2 * plane]]).toEqual([
      reference[2],
      reference[1],
      reference[0],
    ]);
    let mismatches = 0;
    for (let p = 0; p < plane; p++) {
      for (let c = 0; c < 3; c++)
        if (tensor.data[c * plane + p] !== reference[p * 4 + 2 - c]) mismatches++;
    }
    expect(mismatches).toBe(0);
  });
});
