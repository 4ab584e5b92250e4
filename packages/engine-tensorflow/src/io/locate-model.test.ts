import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { temporaryFolder } from '../test-support/requests.js';
import { locateModel } from './locate-model.js';

const tmp = temporaryFolder('locate');
const NAMES = { name: 'm' };
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
  it('finds <folder>.json as npm packages of TF.js models ship it, and option.modelName first', async () => {
    const dir = folder('emotion', ['emotion.json', 'emotion.bin', 'labels.json']);
    expect(await locateModel(dir, undefined, { name: 'moods' })).toEqual({
      kind: 'tfjs',
      file: path.join(dir, 'emotion.json'),
    });
    expect(await locateModel(dir, undefined, { name: 'labels' })).toEqual({
      kind: 'tfjs',
      file: path.join(dir, 'labels.json'),
    });
    const prefixed = folder('prefixed', ['net.json', 'net.bin', 'model.json']);
    expect(await locateModel(prefixed, undefined, { name: 'x', modelName: 'net' })).toEqual({
      kind: 'tfjs',
      file: path.join(prefixed, 'net.json'),
    });
  });

  it('finds a TF.js model.json before a SavedModel', async () => {
    const dir = folder('both', ['model.json', 'saved_model.pb']);
    expect(await locateModel(dir, undefined, NAMES)).toEqual({
      kind: 'tfjs',
      file: path.join(dir, 'model.json'),
    });
  });

  it('finds a SavedModel by saved_model.pb or .pbtxt', async () => {
    const pb = folder('pb', ['saved_model.pb', 'variables/variables.index']);
    const pbtxt = folder('pbtxt', ['saved_model.pbtxt']);
    expect(await locateModel(pb, undefined, NAMES)).toEqual({ kind: 'saved-model', dir: pb });
    expect(await locateModel(pbtxt, undefined, NAMES)).toEqual({ kind: 'saved-model', dir: pbtxt });
  });

  it('follows modelFile: a json file, a saved_model.pb or a SavedModel folder', async () => {
    const dir = folder('named', ['web/classifier.json', 'export/saved_model.pb']);
    expect(await locateModel(dir, 'web/classifier.json', NAMES)).toEqual({
      kind: 'tfjs',
      file: path.join(dir, 'web/classifier.json'),
    });
    expect(await locateModel(dir, 'export/saved_model.pb', NAMES)).toEqual({
      kind: 'saved-model',
      dir: path.join(dir, 'export'),
    });
    expect(await locateModel(dir, 'export', NAMES)).toEqual({
      kind: 'saved-model',
      dir: path.join(dir, 'export'),
    });
  });

  it('says what it looked for when there is no model', async () => {
    const dir = folder('empty', ['model.onnx']);
    await expect(locateModel(dir, undefined, NAMES)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringMatching(/model\.json.*saved_model\.pb/),
    });
    await expect(locateModel(dir, 'missing.json', NAMES)).rejects.toMatchObject({
      code: 'MODEL_LOAD_FAILED',
    });
    await expect(locateModel(dir, 'model.onnx', NAMES)).rejects.toMatchObject({
      code: 'UNSUPPORTED_FORMAT',
    });
  });
});
