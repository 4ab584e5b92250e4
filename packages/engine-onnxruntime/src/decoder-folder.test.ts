import { mkdir, mkdtemp, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gptDecoderModel, mlpModel } from '@kiln/model-tools';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decoderFolderSettings } from './decoder-folder.js';
import { graphInputNames } from './graph-input-names.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-decoder-folder-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

/** Moves a generated folder's model.onnx to onnx/`file`, as transformers.js keeps it. */
async function asTransformersJs(dir: string, file = 'model.onnx'): Promise<string[]> {
  await mkdir(join(dir, 'onnx'), { recursive: true });
  await rename(join(dir, 'model.onnx'), join(dir, 'onnx', file));
  await rm(join(dir, 'serving.properties'));
  const files = await readdir(dir, { recursive: true });
  return files.map((f) => f.replaceAll('\\', '/')).sort();
}

describe('a transformers.js decoder folder', () => {
  it('implies text generation, read from the graph inputs past the weights', async () => {
    const dir = join(root, 'gpt');
    await gptDecoderModel(dir, { layers: 2, hidden: 32, heads: 2, maxLen: 16 });
    const files = await asTransformersJs(dir, 'decoder_model_merged_quantized.onnx');
    const inputs = await graphInputNames(join(dir, 'onnx', 'decoder_model_merged_quantized.onnx'));
    expect(inputs).toEqual(
      expect.arrayContaining(['input_ids', 'attention_mask', 'past_key_values.1.value']),
    );
    expect(await decoderFolderSettings(dir, files)).toEqual({ 'option.rolling_batch': 'auto' });
    // Without config.json it is a tensor model like any other.
    expect(
      await decoderFolderSettings(
        dir,
        files.filter((f) => f !== 'config.json'),
      ),
    ).toEqual({});
  });

  it('implies nothing for a model without a KV cache, or one that cannot be read', async () => {
    const dir = join(root, 'mlp');
    await mlpModel(dir, { inputSize: 8, hidden: [16], outputSize: 4 });
    await writeFile(join(dir, 'config.json'), '{"model_type": "bert"}');
    const files = await asTransformersJs(dir);
    expect(await graphInputNames(join(dir, 'onnx', 'model.onnx'))).toHaveLength(1);
    expect(await decoderFolderSettings(dir, files)).toEqual({});
    await writeFile(join(dir, 'onnx', 'model.onnx'), 'not an onnx file');
    expect(await decoderFolderSettings(dir, files)).toEqual({});
  });
});
