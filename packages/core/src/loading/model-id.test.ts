import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ENGINE_SPECIFICATION_VERSION, type EngineProvider } from '../engine/engine.js';
import { EngineRegistry } from '../engine/engine-registry.js';
import { KilnErrorCode } from '../errors.js';
import { inspectModelSource } from './model-loader.js';

/** A provider that loads nothing: inspection only asks it to recognise files. */
function provider(name: string, file: string, extra: Partial<EngineProvider> = {}): EngineProvider {
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name,
    rank: 1,
    recognizes: (files) => files.includes(file),
    load: () => Promise.reject(new Error('not loaded in these tests')),
    ...extra,
  };
}

describe('option.model_id', () => {
  let work: string;
  let registry: EngineRegistry;

  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-model-id-'));
    registry = new EngineRegistry({});
    registry.register(provider('Fake', 'model.fake'));
    registry.register(provider('Handler', 'model.py', { passesSettingsToModel: true }));
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  async function folder(name: string, files: Record<string, string>): Promise<string> {
    const dir = path.join(work, name);
    await mkdir(dir, { recursive: true });
    for (const [file, text] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await writeFile(path.join(dir, file), text);
    }
    return dir;
  }

  it("reads the model's files from a folder relative to the model's, or absolute", async () => {
    const weights = await folder('store/weights', { 'model.fake': 'w', 'config.json': '{}' });
    const relative = await folder('store/chat', {
      'serving.properties': 'option.model_id=../weights\nbatch_size=2\n',
    });
    expect(await inspectModelSource(relative, { registry })).toMatchObject({
      name: 'chat',
      dir: weights,
      files: ['config.json', 'model.fake'],
      fromModelId: true,
      engineName: 'Fake',
      properties: { batchSize: 2, options: { model_id: '../weights' } },
      settings: { warnings: [], errors: [] },
    });
    const absolute = await folder('elsewhere', {
      'serving.properties': `option.model_id=${weights}\n`,
    });
    expect(await inspectModelSource(absolute, { registry })).toMatchObject({
      name: 'elsewhere',
      dir: weights,
    });
  });

  it('takes a local folder named like a Hub id before calling it a Hub id', async () => {
    const dir = await folder('m', {
      'serving.properties': 'option.model_id=TinyLlama/TinyLlama-1.1B-Chat-v1.0\n',
      'TinyLlama/TinyLlama-1.1B-Chat-v1.0/model.fake': 'w',
    });
    expect((await inspectModelSource(dir, { registry })).dir).toBe(
      path.join(dir, 'TinyLlama/TinyLlama-1.1B-Chat-v1.0'),
    );
  });

  it('fails a Hub id or remote URL with no local folder, saying downloads are not available', async () => {
    for (const id of [
      'TinyLlama/TinyLlama-1.1B-Chat-v1.0',
      'gpt2',
      's3://bucket/llama/',
      'https://huggingface.co/TinyLlama/TinyLlama-1.1B-Chat-v1.0',
    ]) {
      const dir = await folder(`m-${id.length}`, {
        'serving.properties': `option.model_id=${id}\n`,
      });
      const failure = inspectModelSource(dir, { registry });
      await expect(failure).rejects.toMatchObject({ code: KilnErrorCode.ModelNotFound });
      await expect(failure).rejects.toThrow(
        `option.model_id=${id} ${id.includes('://') ? 'is a remote location' : 'looks like a Hugging Face Hub id and names no local folder'}: Hugging Face Hub and remote downloads are not available on this server; download the model folder and point option.model_id at it`,
      );
    }
  });

  it('names a missing path without the server path it resolved to', async () => {
    const dir = await folder('m', { 'serving.properties': 'option.model_id=/srv/models/gone\n' });
    await expect(inspectModelSource(dir, { registry })).rejects.toThrow(
      "option.model_id names no folder (gone); relative paths start at the model's folder",
    );
  });

  it('refuses a folder outside the root, whether or not it exists', async () => {
    const outside = await folder('outside', { 'model.fake': 'w' });
    const store = path.join(work, 'store');
    for (const id of [outside, path.join(work, 'missing'), '../../outside']) {
      const dir = await folder(`store/m-${id.length}`, {
        'serving.properties': `option.model_id=${id}\n`,
      });
      await expect(inspectModelSource(dir, { registry, root: store })).rejects.toMatchObject({
        code: KilnErrorCode.UrlNotAllowed,
        message: `option.model_id=${id} names a folder outside the model store`,
      });
    }
  });

  it("takes a folder inside the model's own under a root it is not in (an unpacked archive)", async () => {
    const dir = await folder('cache/unpacked', {
      'serving.properties': 'option.model_id=weights\n',
      'weights/model.fake': 'w',
    });
    expect((await inspectModelSource(dir, { registry, root: path.join(work, 'store') })).dir).toBe(
      path.join(dir, 'weights'),
    );
  });

  it("leaves option.model_id to a handler that reads it (Python mode's)", async () => {
    const dir = await folder('handler', {
      'model.py': '',
      'serving.properties': 'option.model_id=gpt2\n',
    });
    expect(await inspectModelSource(dir, { registry })).toMatchObject({
      dir,
      fromModelId: false,
      engineName: 'Handler',
    });
  });
});

describe("settings an engine reads off the model's files", () => {
  let work: string;
  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-implied-'));
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('lie under serving.properties: what the model says wins', async () => {
    const registry = new EngineRegistry({});
    const seen: string[][] = [];
    registry.register(
      provider('Fake', 'model.fake', {
        impliedSettings: async (_dir, files) => {
          seen.push([...files]);
          return { 'option.rolling_batch': 'auto', batch_size: '3' };
        },
      }),
    );
    const dir = path.join(work, 'm');
    await mkdir(dir);
    await writeFile(path.join(dir, 'model.fake'), 'w');
    expect((await inspectModelSource(dir, { registry })).properties).toMatchObject({
      batchSize: 3,
      options: { rolling_batch: 'auto' },
    });
    await writeFile(path.join(dir, 'serving.properties'), 'option.rolling_batch=disable\n');
    expect((await inspectModelSource(dir, { registry })).properties.options).toEqual({
      rolling_batch: 'disable',
    });
    expect(seen[0]).toEqual(['model.fake']);
  });
});
