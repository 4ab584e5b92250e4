import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CPU, type Engine, NDList, Tensor, servingPropertiesFrom } from '@kiln/core';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { createTensorFlowEngine, probeTensorFlow } from '@kiln/engine-tensorflow';
import { checkEngine } from '@kiln/testing';
import { writeCnnTwins, writeMlpTwins } from './models.js';
import { rawTfjs, rawTfjsContender } from './raw-tfjs.js';

const tensorflow = await checkEngine('TensorFlow', () => probeTensorFlow('wasm'));
const onnxRuntime = await checkEngine('OnnxRuntime', async () => {
  try {
    await createOnnxRuntimeEngine().load();
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
});

describe.skipIf(!tensorflow.run || !onnxRuntime.run)('tensorflow bench models', () => {
  const dir = mkdtemp(join(tmpdir(), 'kiln-bench-tf-test-'));
  afterAll(async () => rm(await dir, { recursive: true, force: true }));

  const request = (modelDir: string) => ({
    name: 'm',
    modelDir,
    device: CPU,
    options: {},
    properties: servingPropertiesFrom({}),
  });
  const forward = async (engine: Engine, modelDir: string, input: NDList) => {
    const model = await engine.loadModel(request(modelDir));
    const context = await model.newExecutionContext();
    const output = (await context.forward(input)).get(0);
    await model.dispose();
    return output;
  };

  it('builds each network twice with the same weights: TensorFlow, ONNX Runtime and raw tfjs agree', async () => {
    const root = await dir;
    const [tfEngine, ortEngine] = await Promise.all([
      createTensorFlowEngine({ backend: 'wasm' }).load(),
      createOnnxRuntimeEngine().load(),
    ]);
    const tf = await rawTfjs('wasm');
    for (const twin of [await writeCnnTwins(root), await writeMlpTwins(root)]) {
      const batch = 2;
      const data = Float32Array.from(
        { length: batch * twin.tfjsExample.reduce((a, b) => a * b, 1) },
        (_, i) => Math.cos(i / 31),
      );
      const shape = [batch, ...twin.tfjsExample];
      const kiln = await forward(
        tfEngine,
        twin.tfjsDir,
        NDList.of(new Tensor('float32', data, shape, twin.inputName)),
      );
      const onnx = await forward(
        ortEngine,
        twin.onnxDir,
        NDList.of(
          new Tensor(
            'float32',
            twin.toOnnxLayout(data, batch),
            [batch, ...twin.onnxExample],
            twin.inputName,
          ),
        ),
      );
      const raw = await rawTfjsContender('raw', tf, twin.tfjsDir, data, shape);
      const rawOutput = (await raw.call()) as Float32Array;
      raw.close();

      expect([...kiln.shape]).toEqual([batch, twin.outputSize]);
      expect(Array.from(kiln.data as Float32Array)).toEqual(Array.from(rawOutput));
      expect([...onnx.shape]).toEqual([batch, twin.outputSize]);
      const scale = Math.max(...Array.from(rawOutput, Math.abs));
      expect(scale).toBeGreaterThan(0.01);
      Array.from(onnx.data as Float32Array).forEach((v, i) =>
        expect(Math.abs(v - rawOutput[i]!)).toBeLessThan(1e-4 * Math.max(1, scale)),
      );
    }
  });
});
