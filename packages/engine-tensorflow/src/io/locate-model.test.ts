import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { temporaryFolder } from '../test-support/requests.js';
import { locateModel } from './locate-model.js';

const tmp = temporaryFolder('locate');
afterAll(tmp.remove);

function folder(name: string, files: string[]): string {
  const dir = path.join(tmp.dir, name);
  for (const file of files) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), '{}');
  }
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

describe('locateModel', () => {
  it('finds a TF.js model.json before a SavedModel', async () => {
    const dir = folder('both', ['model.json', 'saved_model.pb']);
    expect(await locateModel(dir)).toEqual({ kind: 'tfjs', file: path.join(dir, 'model.json') });
  });

  it('finds a SavedModel by saved_model.pb or .pbtxt', async () => {
    const pb = folder('pb', ['saved_model.pb', 'variables/variables.index']);
    const pbtxt = folder('pbtxt', ['saved_model.pbtxt']);
    expect(await locateModel(pb)).toEqual({ kind: 'saved-model', dir: pb });
    expect(await locateModel(pbtxt)).toEqual({ kind: 'saved-model', dir: pbtxt });
  });

  it('follows modelFile: a json file, a saved_model.pb or a SavedModel folder', async () => {
    const dir = folder('named', ['web/classifier.json', 'export/saved_model.pb']);
    expect(await locateModel(dir, 'web/classifier.json')).toEqual({
      kind: 'tfjs',
      file: path.join(dir, 'web/classifier.json'),
    });
    expect(await locateModel(dir, 'export/saved_model.pb')).toEqual({
      kind: 'saved-model',
      dir: path.join(dir, 'export'),
    });
    expect(await locateModel(dir, 'export')).toEqual({
      kind: 'saved-model',
      dir: path.join(dir, 'export'),
    });
  });

  it('says what it looked for when there is no model', async () => {
    const dir = folder('empty', ['model.onnx']);
    await expect(locateModel(dir)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringMatching(/model\.json.*saved_model\.pb/),
    });
    await expect(locateModel(dir, 'missing.json')).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
    });
    await expect(locateModel(dir, 'model.onnx')).rejects.toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
    });
  });
});
