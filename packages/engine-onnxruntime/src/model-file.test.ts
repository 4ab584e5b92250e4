import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findModelFile } from './model-file.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-model-file-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function folder(name: string, files: string[]): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir);
  for (const file of files) await writeFile(join(dir, file), 'x');
  return dir;
}

describe('findModelFile', () => {
  it('picks the named file, then <name>.onnx, then model.onnx, then the only .onnx', async () => {
    const many = await folder('many', ['resnet.onnx', 'model.onnx', 'other.onnx']);
    expect(await findModelFile(many, 'resnet')).toBe(join(many, 'resnet.onnx'));
    expect(await findModelFile(many, 'x')).toBe(join(many, 'model.onnx'));
    expect(await findModelFile(many, 'x', 'other.onnx')).toBe(join(many, 'other.onnx'));
    const one = await folder('one', ['weights.ONNX', 'synset.txt']);
    expect(await findModelFile(one, 'x')).toBe(join(one, 'weights.ONNX'));
  });

  it('says why when there is no single answer', async () => {
    const none = await folder('none', ['synset.txt']);
    await expect(findModelFile(none, 'x')).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' });
    const two = await folder('two', ['a.onnx', 'b.onnx']);
    await expect(findModelFile(two, 'x')).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringMatching(/a.onnx, b.onnx/),
    });
    await expect(findModelFile(two, 'x', 'c.onnx')).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
    await expect(findModelFile(join(root, 'missing'), 'x')).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
  });
});
