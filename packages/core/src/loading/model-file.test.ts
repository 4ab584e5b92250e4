import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findModelFile } from './model-file.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-model-file-'));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

function folder(...files: string[]): string {
  const dir = fs.mkdtempSync(path.join(root, 'm-'));
  for (const file of files) fs.writeFileSync(path.join(dir, file), '');
  return dir;
}

const torch = { name: 'resnet', extensions: ['.pt', '.torchscript'], format: 'TorchScript' };

describe('findModelFile', () => {
  it('prefers <name><ext>, then model<ext>, then the only file of the format', async () => {
    let dir = folder('model.pt', 'resnet.pt', 'notes.txt');
    expect(await findModelFile(dir, torch)).toBe(path.join(dir, 'resnet.pt'));
    dir = folder('model.pt', 'other.pt');
    expect(await findModelFile(dir, torch)).toBe(path.join(dir, 'model.pt'));
    dir = folder('weights.TORCHSCRIPT', 'readme.md');
    expect(await findModelFile(dir, torch)).toBe(path.join(dir, 'weights.TORCHSCRIPT'));
  });

  it('prefers option.modelName, then the model name, then the folder name, then model', async () => {
    const named = (dirName: string, ...files: string[]) => {
      const dir = path.join(fs.mkdtempSync(path.join(root, 'n-')), dirName);
      fs.mkdirSync(dir);
      for (const file of files) fs.writeFileSync(path.join(dir, file), '');
      return dir;
    };
    let dir = named('squeezenet', 'squeezenet.pt', 'model.pt', 'net.pt');
    expect(await findModelFile(dir, { ...torch, name: 'sq' })).toBe(
      path.join(dir, 'squeezenet.pt'),
    );
    expect(await findModelFile(dir, { ...torch, name: 'sq', modelName: 'net' })).toBe(
      path.join(dir, 'net.pt'),
    );
    dir = named('squeezenet', 'sq.pt', 'squeezenet.pt');
    expect(await findModelFile(dir, { ...torch, name: 'sq' })).toBe(path.join(dir, 'sq.pt'));
  });

  it('takes the file the request names, relative or absolute, and checks it exists', async () => {
    const dir = folder('a.pt', 'b.pt');
    expect(await findModelFile(dir, { ...torch, modelFile: 'b.pt' })).toBe(path.join(dir, 'b.pt'));
    expect(await findModelFile(dir, { ...torch, modelFile: path.join(dir, 'a.pt') })).toBe(
      path.join(dir, 'a.pt'),
    );
    await expect(findModelFile(dir, { ...torch, modelFile: 'c.pt' })).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
  });

  it('explains an empty or ambiguous folder', async () => {
    await expect(findModelFile(folder('x.onnx'), torch)).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
      message: expect.stringContaining('no TorchScript file'),
    });
    await expect(findModelFile(folder('a.pt', 'b.pt'), torch)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining('several'),
    });
    await expect(findModelFile(path.join(root, 'missing'), torch)).rejects.toMatchObject({
      code: 'MODEL_NOT_FOUND',
    });
  });
});
