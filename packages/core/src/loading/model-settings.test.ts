import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ENGINE_SPECIFICATION_VERSION, type EngineProvider } from '../engine/engine.js';
import { EngineRegistry } from '../engine/engine-registry.js';
import { KilnErrorCode } from '../errors.js';
import type { SettingDeclaration } from '../settings/setting-declaration.js';
import { IMAGE_CLASSIFICATION_ARGUMENTS } from '../translators/image-options.js';
import { inspectModelSource, resolveModelLoad } from './model-loader.js';
import {
  type ModelSettingsContext,
  checkModelSettings,
  settingsRefusal,
} from './model-settings.js';
import { servingPropertiesFrom } from './serving-properties.js';

/** A provider that only declares options: the settings check never loads an engine. */
function provider(
  name: string,
  options: readonly SettingDeclaration[],
  extra: Partial<EngineProvider> = {},
): EngineProvider {
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name,
    rank: 1,
    options,
    recognizes: (files) => files.some((f) => f.endsWith(`.${name.toLowerCase()}`)),
    load: () => Promise.reject(new Error(`${name} is not installed in this test`)),
    ...extra,
  };
}

const ort = provider('OnnxRuntime', [
  { key: 'intraOpNumThreads', type: 'integer', min: 1, doc: 'threads' },
  { key: 'ortDevice', type: 'choice', values: ['cpu', 'cuda'], doc: 'provider' },
  {
    key: 'disablePerSessionThreads',
    type: 'boolean',
    doc: 'global pools',
    unsupported: 'no global thread pools',
  },
]);
const torch = provider('PyTorch', [
  { key: 'mapLocation', type: 'boolean', doc: 'map' },
  { key: 'extraFiles', type: 'list', doc: 'files' },
]);
const python = provider('Python', [{ key: 'entryPoint', type: 'string', doc: 'entry' }], {
  passesSettingsToModel: true,
});
const providers = [ort, torch, python];

/** The check of `raw`, by default for an ONNX model with the raw translator (no arguments). */
function check(raw: Record<string, string>, context: Partial<ModelSettingsContext> = {}) {
  return checkModelSettings(servingPropertiesFrom(raw), {
    engine: ort,
    providers,
    translatorArguments: [],
    ...context,
  });
}

function messages(raw: Record<string, string>, context: Partial<ModelSettingsContext> = {}) {
  return check(raw, context).warnings.map((w) => w.message);
}

describe('checkModelSettings', () => {
  it('passes the keys Kiln, the engine and the translator read', () => {
    expect(
      check(
        {
          engine: 'OnnxRuntime',
          batch_size: '4',
          'gpu.maxWorkers': '2',
          'option.intraOpNumThreads': '2',
          'option.rolling_batch': 'auto',
          topK: '3',
        },
        { translatorArguments: IMAGE_CLASSIFICATION_ARGUMENTS },
      ),
    ).toEqual({ warnings: [], errors: [] });
  });

  it('names the closest known key of a misspelt serving key or translator argument', () => {
    expect(messages({ max_workers: '4', batchSize: '2' })).toEqual([
      'unknown key max_workers (did you mean maxWorkers?)',
      'unknown key batchSize (did you mean batch_size?)',
    ]);
    expect(
      messages({ topk: '3', widht: '10' }, { translatorArguments: IMAGE_CLASSIFICATION_ARGUMENTS }),
    ).toEqual(['unknown key topk (did you mean topK?)', 'unknown key widht (did you mean width?)']);
    // The raw translator takes no arguments: an image argument does nothing there.
    expect(messages({ topK: '3' })).toEqual(['unknown key topK: Kiln ignores it']);
  });

  it("says an option belongs to another engine, and names the engine's closest key", () => {
    expect(
      messages({
        'option.mapLocation': 'true',
        'option.extraFiles': 'a.txt',
        'option.intraOpNumThread': '2',
        'option.noSuchThing': '1',
      }),
    ).toEqual([
      'option.mapLocation is an option of the PyTorch engine: OnnxRuntime ignores it',
      'option.extraFiles is an option of the PyTorch engine: OnnxRuntime ignores it',
      'unknown key option.intraOpNumThread (did you mean option.intraOpNumThreads?)',
      'unknown key option.noSuchThing: the OnnxRuntime engine ignores it',
    ]);
  });

  it('warns that keys DJL defines but Kiln does not implement are ignored', () => {
    expect(
      messages({
        'option.disablePerSessionThreads': 'true',
        log_model_metric: 'true',
        required_memory_mb: '1024',
      }),
    ).toEqual([
      'option.disablePerSessionThreads is not supported by Kiln, ignored: no global thread pools',
      'log_model_metric is not supported by Kiln, ignored: Kiln reports every model on its metrics listener (/metrics)',
      'required_memory_mb is not supported by Kiln, ignored: Kiln does not reserve memory per model',
    ]);
  });

  it('leaves keys a Python handler or a plugin translator may read, but for near misses', () => {
    expect(
      messages(
        { 'option.model_id': 'gpt2', 'option.entrypoint': 'x.py', custom: '1' },
        { engine: python, translatorArguments: undefined },
      ),
    ).toEqual(['unknown key option.entrypoint (did you mean option.entryPoint?)']);
    expect(
      messages({ myArgument: '1', batch_sise: '2' }, { translatorArguments: undefined }),
    ).toEqual(['unknown key batch_sise (did you mean batch_size?)']);
  });

  it('checks no option.* key when the engine declares none or is unknown', () => {
    const bare = provider('Bare', [], { options: undefined });
    expect(check({ 'option.anything': '1' }, { engine: bare }).warnings).toEqual([]);
    expect(check({ 'option.anything': '1' }, { engine: undefined }).warnings).toEqual([]);
  });

  it('refuses a rolling-batch backend Kiln does not have, and a choice it does not offer', () => {
    const { errors } = check({ 'option.rolling_batch': 'lmi-dist', 'option.ortDevice': 'rocm' });
    expect(errors).toEqual([
      "option.rolling_batch=lmi-dist: Kiln has no lmi-dist backend: use auto or scheduler (Kiln's rolling-batch scheduler on ONNX Runtime), or disable",
      'option.ortDevice=rocm is not one of cpu, cuda',
    ]);
    expect(settingsRefusal('llm', { warnings: [], errors })).toMatchObject({
      code: KilnErrorCode.InvalidConfig,
      message: expect.stringMatching(
        /^model llm: serving\.properties asks for what Kiln cannot do: option\.rolling_batch=lmi-dist/,
      ),
    });
    expect(check({ 'option.rolling_batch': 'disable' }).errors).toEqual([]);
  });
});

describe('model loading checks settings', () => {
  let dir: string;
  const registry = new EngineRegistry({});
  registry.register(ort);
  registry.register(torch);

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-model-settings-'));
    await writeFile(path.join(dir, 'model.onnxruntime'), 'weights');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reports warnings with the inspection, the engine recognised from the files', async () => {
    await writeFile(path.join(dir, 'serving.properties'), 'option.mapLocation=false\n');
    const inspection = await inspectModelSource(dir, {
      registry,
      overrides: { max_wokers: '2' },
    });
    expect(inspection.engineName).toBe('OnnxRuntime');
    expect(inspection.settings.warnings.map((w) => w.message)).toEqual([
      'option.mapLocation is an option of the PyTorch engine: OnnxRuntime ignores it',
      'unknown key max_wokers (did you mean maxWorkers?)',
    ]);
  });

  it('fails the load of a model asking for what Kiln cannot do, before any engine loads', async () => {
    await writeFile(path.join(dir, 'serving.properties'), 'option.rolling_batch=lmi-dist\n');
    expect((await inspectModelSource(dir, { registry })).settings.errors).toHaveLength(1);
    await expect(resolveModelLoad(dir, { registry })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
      message: expect.stringMatching(/option\.rolling_batch=lmi-dist: Kiln has no lmi-dist/),
    });
  });
});
