import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NDList, Tensor } from '@kiln/core';
import { buildIrisDemo, irisData, resnetModel, transformerEncoderModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeOrt } from './probe.js';
import { loadOrtModel } from './test-support/load.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-generated-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

// The generators in @kiln/model-tools write graphs by hand; these tests prove ONNX Runtime
// computes what they were built to compute.
describe.skipIf(!run)('generated models under ONNX Runtime', () => {
  it('the Iris demo predicts what its trainer measured', async () => {
    const demo = await buildIrisDemo(join(root, 'iris'));
    const model = await loadOrtModel(demo.dir, { intraOpNumThreads: '1' });
    const context = await model.newExecutionContext();
    const { rows, labels } = irisData();
    const output = await context.forward(
      NDList.of(
        new Tensor('float32', Float32Array.from(rows.flat()), [rows.length, 4], 'features'),
      ),
    );
    const probabilities = output.get('probabilities').data as Float32Array;
    let correct = 0;
    for (let r = 0; r < rows.length; r++) {
      const row = Array.from(probabilities.subarray(r * 3, r * 3 + 3));
      expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
      if (row.indexOf(Math.max(...row)) === labels[r]) correct++;
    }
    const expected =
      (demo.trainAccuracy * demo.trainRows + demo.holdoutAccuracy * demo.holdoutRows) / rows.length;
    expect(correct / rows.length).toBeCloseTo(expected, 5);
    await model.dispose();
  });

  it('the encoder takes any batch and length, and padding leaves real tokens unchanged', async () => {
    const encoder = await transformerEncoderModel(join(root, 'encoder'), {
      layers: 2,
      hidden: 32,
      heads: 4,
      maxLen: 16,
      vocabSize: 50,
    });
    const model = await loadOrtModel(encoder.dir);
    expect(model.inputs.map((d) => [d.name, d.dtype, d.shape])).toEqual([
      ['input_ids', 'int64', [-1, -1]],
      ['attention_mask', 'int64', [-1, -1]],
    ]);
    const context = await model.newExecutionContext();
    const encode = async (ids: number[][], mask: number[][]) => {
      const shape = [ids.length, ids[0]!.length];
      const out = await context.forward(
        NDList.of(
          new Tensor('int64', BigInt64Array.from(ids.flat(), BigInt), shape, 'input_ids'),
          new Tensor('int64', BigInt64Array.from(mask.flat(), BigInt), shape, 'attention_mask'),
        ),
      );
      return out.get('last_hidden_state');
    };
    const alone = await encode([[5, 9, 2, 7]], [[1, 1, 1, 1]]);
    const padded = await encode(
      [
        [3, 1, 4, 1, 5, 9, 2],
        [5, 9, 2, 7, 0, 0, 0],
      ],
      [
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0, 0, 0],
      ],
    );
    expect(alone.shape).toEqual([1, 4, 32]);
    expect(padded.shape).toEqual([2, 7, 32]);
    const row = (padded.data as Float32Array).subarray(7 * 32, 7 * 32 + 4 * 32);
    Array.from(alone.data as Float32Array).forEach((v, i) => expect(row[i]).toBeCloseTo(v, 4));
    await model.dispose();
  });

  it('ResNet-18 classifies a batch into finite logits of the requested classes', async () => {
    const resnet = await resnetModel(join(root, 'resnet'), { depth: 18, classes: 7 });
    const model = await loadOrtModel(resnet.dir);
    expect(model.outputs).toEqual([{ name: 'logits', dtype: 'float32', shape: [-1, 7] }]);
    const context = await model.newExecutionContext();
    const x = Float32Array.from({ length: 2 * 3 * 224 * 224 }, (_, i) => Math.sin(i / 97));
    const logits = (
      await context.forward(NDList.of(new Tensor('float32', x, [2, 3, 224, 224], 'input')))
    ).get(0);
    expect(logits.shape).toEqual([2, 7]);
    expect(Array.from(logits.data as Float32Array).every(Number.isFinite)).toBe(true);
    expect(new Set(Array.from(logits.data as Float32Array)).size).toBeGreaterThan(7);
    await model.dispose();
  });
});
