import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findModelFile } from './model-file.js';
import { findTransformersJsFile } from './transformers-js-file.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-transformers-js-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

/** A folder holding `files` (paths inside it), each a placeholder. */
async function folder(name: string, files: string[]): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  for (const file of files) {
    await mkdir(dirname(join(dir, file)), { recursive: true });
    await writeFile(join(dir, file), 'x');
  }
  return dir;
}

describe('findTransformersJsFile', () => {
  it('picks the file transformers.js names for each dtype, fp32 by default', async () => {
    const dir = await folder('all', [
      'config.json',
      'onnx/model.onnx',
      'onnx/model.onnx_data',
      'onnx/model_fp16.onnx',
      'onnx/model_quantized.onnx',
      'onnx/model_q4.onnx',
    ]);
    expect(await findTransformersJsFile(dir, undefined)).toBe(join(dir, 'onnx/model.onnx'));
    expect(await findTransformersJsFile(dir, 'fp32')).toBe(join(dir, 'onnx/model.onnx'));
    expect(await findTransformersJsFile(dir, 'fp16')).toBe(join(dir, 'onnx/model_fp16.onnx'));
    expect(await findTransformersJsFile(dir, 'q8')).toBe(join(dir, 'onnx/model_quantized.onnx'));
    expect(await findTransformersJsFile(dir, 'q4')).toBe(join(dir, 'onnx/model_q4.onnx'));
  });

  it("takes Optimum's merged decoder when there is no plain model", async () => {
    const dir = await folder('merged', ['onnx/decoder_model_merged_quantized.onnx']);
    expect(await findTransformersJsFile(dir, 'q8')).toBe(
      join(dir, 'onnx/decoder_model_merged_quantized.onnx'),
    );
  });

  it('names the files there are when the dtype has none, and refuses an unknown dtype', async () => {
    const dir = await folder('quantized-only', ['onnx/model_quantized.onnx', 'onnx/model_q4.onnx']);
    await expect(findTransformersJsFile(dir, undefined)).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
      message: expect.stringMatching(
        /no fp32 model \(model\.onnx\).*model_q4\.onnx, model_quantized\.onnx.*option\.dtype/,
      ),
    });
    await expect(findTransformersJsFile(dir, 'fp16')).rejects.toMatchObject({
      message: expect.stringContaining('model_fp16.onnx'),
    });
    await expect(findTransformersJsFile(dir, 'int3')).rejects.toMatchObject({
      code: 'INVALID_CONFIG',
    });
  });

  it('answers nothing for a folder without onnx/ or without a model in it', async () => {
    expect(
      await findTransformersJsFile(await folder('plain', ['model.onnx']), 'q8'),
    ).toBeUndefined();
    expect(
      await findTransformersJsFile(await folder('empty', ['onnx/readme.txt']), undefined),
    ).toBeUndefined();
  });
});

describe('findModelFile with a transformers.js folder', () => {
  it('falls back to onnx/ only when the top has no .onnx, and follows option.dtype there', async () => {
    const tjs = await folder('tjs', ['config.json', 'onnx/model.onnx', 'onnx/model_q4.onnx']);
    expect(await findModelFile(tjs, 'x')).toBe(join(tjs, 'onnx/model.onnx'));
    expect(await findModelFile(tjs, 'x', undefined, undefined, 'q4')).toBe(
      join(tjs, 'onnx/model_q4.onnx'),
    );
    const both = await folder('both', ['model.onnx', 'onnx/model.onnx']);
    expect(await findModelFile(both, 'x')).toBe(join(both, 'model.onnx'));
    const none = await folder('none', ['config.json']);
    await expect(findModelFile(none, 'x')).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' });
    await expect(findModelFile(none, 'x', undefined, undefined, 'q8')).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
      message: expect.stringContaining('onnx/'),
    });
  });
});
