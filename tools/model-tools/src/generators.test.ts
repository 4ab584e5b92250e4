import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMulModel, affineModel, identityModel } from './conformance-models.js';
import type { OnnxModel } from './graph-builder.js';
import { mlpModel } from './mlp-model.js';
import { resnetModel } from './resnet.js';
import { decodeOnnxModel } from './save-model.js';
import { slowModel } from './slow-model.js';
import { transformerEncoderModel } from './transformer-encoder.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-model-tools-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function load(dir: string): Promise<OnnxModel> {
  return decodeOnnxModel(await readFile(join(dir, 'model.onnx')));
}

function opCounts(model: OnnxModel): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const node of model.graph!.node!) counts[node.opType!] = (counts[node.opType!] ?? 0) + 1;
  return counts;
}

function signature(
  model: OnnxModel,
  which: 'input' | 'output',
): [string, number, (string | number)[]][] {
  return model.graph![which]!.map((v) => [
    v.name!,
    v.type!.tensorType!.elemType!,
    v.type!.tensorType!.shape!.dim!.map((d) => d.dimParam || Number(d.dimValue)),
  ]);
}

describe('model generators', () => {
  it('write a model folder with serving.properties naming the engine', async () => {
    const dir = await identityModel(join(root, 'identity'), 'uint16');
    expect(await readFile(join(dir, 'serving.properties'), 'utf8')).toBe('engine=OnnxRuntime\n');
    const model = await load(dir);
    expect(signature(model, 'input')).toEqual([['x', 4, ['batch', 4]]]);
    expect(signature(model, 'output')).toEqual([['y', 4, ['batch', 4]]]);
  });

  it('declare the conformance fixtures the shared suite expects', async () => {
    const addMul = await load(await addMulModel(join(root, 'add-mul')));
    expect(signature(addMul, 'input').map((s) => s[0])).toEqual(['a', 'b']);
    expect(signature(addMul, 'output').map((s) => s[0])).toEqual(['sum', 'product']);
    const affine = await affineModel(join(root, 'affine'));
    expect(affine.weights).toHaveLength(4);
    expect(affine.weights.every((row) => row.length === 2)).toBe(true);
    expect(signature(await load(affine.dir), 'output')).toEqual([['y', 1, ['batch', 2]]]);
  });

  it('build ResNet-18 with torchvision topology and parameter count', async () => {
    const resnet = await resnetModel(join(root, 'resnet18'), { depth: 18, classes: 10 });
    const model = await load(resnet.dir);
    // 1 stem + 16 block convolutions + 3 downsampling shortcuts.
    expect(opCounts(model)).toMatchObject({
      Conv: 20,
      BatchNormalization: 20,
      Add: 8,
      Gemm: 1,
      MaxPool: 1,
      GlobalAveragePool: 1,
    });
    expect(signature(model, 'input')).toEqual([['input', 1, ['batch', 3, 224, 224]]]);
    expect(signature(model, 'output')).toEqual([['logits', 1, ['batch', 10]]]);
    // torchvision's 11,689,512 (1000 classes) less 990 classes of the 512-wide head, plus the
    // BN running mean and variance torchvision counts as buffers: 2 × 4800 BN channels.
    const expected = 11_689_512 - 990 * 513 + 2 * 4800;
    expect(resnet.parameters).toBe(expected);
  });

  it('are deterministic for a seed and differ across seeds', async () => {
    const a = await mlpModel(join(root, 'mlp-a'), {
      inputSize: 8,
      hidden: [4],
      outputSize: 2,
      seed: 5,
    });
    const b = await mlpModel(join(root, 'mlp-b'), {
      inputSize: 8,
      hidden: [4],
      outputSize: 2,
      seed: 5,
    });
    const c = await mlpModel(join(root, 'mlp-c'), {
      inputSize: 8,
      hidden: [4],
      outputSize: 2,
      seed: 6,
    });
    const bytes = async (dir: string) => readFile(join(dir, 'model.onnx'));
    expect((await bytes(a.dir)).equals(await bytes(b.dir))).toBe(true);
    expect((await bytes(a.dir)).equals(await bytes(c.dir))).toBe(false);
  });

  it('build a BERT-style encoder with dynamic batch and sequence', async () => {
    const encoder = await transformerEncoderModel(join(root, 'encoder'), {
      layers: 2,
      hidden: 32,
      heads: 4,
      maxLen: 64,
      vocabSize: 100,
    });
    const model = await load(encoder.dir);
    expect(signature(model, 'input')).toEqual([
      ['input_ids', 7, ['batch', 'sequence']],
      ['attention_mask', 7, ['batch', 'sequence']],
    ]);
    expect(signature(model, 'output')).toEqual([
      ['last_hidden_state', 1, ['batch', 'sequence', 32]],
    ]);
    // Embedding norm + two per layer; one Softmax and one Erf per layer.
    expect(opCounts(model)).toMatchObject({
      LayerNormalization: 5,
      Softmax: 2,
      Erf: 2,
      MatMul: 16,
    });
  });

  it('size the slow model by the time it should take', async () => {
    const short = await slowModel(join(root, 'slow-short'), 10, { matmulMs: 1 });
    const long = await slowModel(join(root, 'slow-long'), 200, { matmulMs: 1 });
    expect(short.layers).toBe(10);
    expect(long.layers).toBe(200);
    expect(opCounts(await load(long.dir)).MatMul).toBe(200);
  });
});
