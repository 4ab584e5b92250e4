import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { NDList, Tensor, decodeImage } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { createTensorFlowEngine, probeTensorFlow } from './index.js';
import type { TfExecutionContext } from './tf-execution-context.js';
import { loadRequest } from './test-support/requests.js';

// Reference models shared beside the repository (see ../shared/models/README.md), when present.
const models = fileURLToPath(new URL('../../../../shared/models/squeezenet1_1/', import.meta.url));
const present = fs.existsSync(`${models}tfjs_layers/model.json`);
if (!present) console.warn(`[kiln] skipping the SqueezeNet reference test: ${models} is absent`);
const availability = await checkEngine('TensorFlow', () => probeTensorFlow('wasm'));

describe.skipIf(!present || !availability.run)(
  'SqueezeNet 1.1 (real ImageNet weights, TF.js layers model)',
  () => {
    it('classifies the kitten as a tabby cat, as its other formats do', async () => {
      const engine = await createTensorFlowEngine({ backend: 'wasm' }).load();
      const model = await engine.loadModel(loadRequest(`${models}tfjs_layers`));
      expect(model.inputs).toEqual([
        { name: 'data_0', dtype: 'float32', shape: [-1, 224, 224, 3] },
      ]);
      expect(model.outputs[0]).toMatchObject({ dtype: 'float32', shape: [-1, 1000] });

      const image = decodeImage(fs.readFileSync(`${models}images/kitten_224.png`));
      expect([image.width, image.height]).toEqual([224, 224]);
      // NHWC, BGR, 0..255, no normalisation (the README's preprocessing).
      const pixels = new Float32Array(224 * 224 * 3);
      for (let p = 0; p < 224 * 224; p++) {
        for (let c = 0; c < 3; c++) pixels[p * 3 + c] = image.data[p * image.channels + (2 - c)]!;
      }
      const context = (await model.newExecutionContext()) as TfExecutionContext;
      const scores = (
        await context.forward(NDList.of(new Tensor('float32', pixels, [1, 224, 224, 3], 'data_0')))
      ).get(0);
      expect([...scores.shape]).toEqual([1, 1000]);
      const probabilities = scores.data as Float32Array;
      const top = probabilities.indexOf(Math.max(...probabilities));
      const labels = fs.readFileSync(`${models}synset.txt`, 'utf8').trim().split('\n');
      expect(labels[top]).toContain('tabby, tabby cat');
      expect(probabilities[top]).toBeCloseTo(0.931, 2);
      await model.dispose();
    });
  },
);
