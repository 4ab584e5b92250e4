import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineRegistry, type Model, Predictor, loadModel, resolveTranslator } from '@kiln/core';
import { provider as ortProvider } from '@kiln/engine-onnxruntime';

// The real pretrained SqueezeNet 1.1 beside the repository (never copied into it).
const SHARED = path.resolve(
  fileURLToPath(new URL('../../../shared/models/squeezenet1_1', import.meta.url)),
);
const present = fs.existsSync(path.join(SHARED, 'model.onnx'));
if (!present) console.warn(`[kiln] skipping SqueezeNet checks: ${SHARED} is absent`);

// The model's conventions (shared/models/README.md): BGR, 0..255, no mean/std.
const IMAGE_ARGS = {
  translatorFactory: 'image-classification',
  channels: 'BGR',
  range: '0-255',
  normalize: 'false',
  topK: '3',
};

const EXPECTED: { image: string; args: Record<string, string>; label: string; p: number }[] = [
  {
    image: 'kitten_224.png',
    args: { resize: 'false', centerCrop: 'false' },
    label: 'tabby, tabby cat',
    p: 0.931,
  },
  { image: 'cat.jpg', args: {}, label: 'Egyptian cat', p: 0.911 },
  { image: 'dog.jpg', args: {}, label: 'golden retriever', p: 0.991 },
];

describe.skipIf(!present)('pretrained SqueezeNet 1.1 through the image translator', () => {
  const registry = new EngineRegistry({});
  registry.register(ortProvider);
  const models: Model[] = [];
  afterAll(async () => Promise.all(models.map((m) => m.dispose())));
  beforeAll(() => expect(present).toBe(true));

  for (const expected of EXPECTED) {
    it(`OnnxRuntime labels ${expected.image} as ${expected.label}`, async () => {
      const model = await loadModel(`squeezenet::OnnxRuntime=${path.join(SHARED, 'model.onnx')}`, {
        registry,
        overrides: { ...IMAGE_ARGS, ...expected.args },
      });
      models.push(model);
      const predictor = await Predictor.create(model, await resolveTranslator(model));
      const output = await predictor.predict({
        body: fs.readFileSync(path.join(SHARED, 'images', expected.image)),
      });
      await predictor.close();
      expect(output.type).toBe('json');
      const [top] = (output as { value: { className: string; probability: number }[] }).value;
      expect(top!.className).toBe(expected.label);
      expect(top!.probability).toBeCloseTo(expected.p, 2);
    });
  }
});
