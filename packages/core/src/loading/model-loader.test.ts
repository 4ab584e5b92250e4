import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { strToU8, zipSync } from 'fflate';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CPU, type Device } from '../engine/device.js';
import {
  ENGINE_SPECIFICATION_VERSION,
  type Engine,
  type EngineProvider,
} from '../engine/engine.js';
import { EngineRegistry } from '../engine/engine-registry.js';
import type { ExecutionContext } from '../engine/execution.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { Model, ModelLoadRequest } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { inspectModelSource, loadModel } from './model-loader.js';

const GPU0: Device = { type: 'gpu', id: 0 };

/**
 * An engine for `.fake` model files whose models double their float32 input: enough to
 * see which engine, device, folder and options the loader handed over.
 */
class FakeEngine implements Engine {
  readonly version = '1.0.0';
  readonly requests: ModelLoadRequest[] = [];
  failure: Error | undefined;

  constructor(
    readonly name: string,
    private readonly deviceList: readonly Device[],
  ) {}

  devices(): readonly Device[] {
    return this.deviceList;
  }

  describe(): Record<string, unknown> {
    return { name: this.name };
  }

  async loadModel(request: ModelLoadRequest): Promise<Model> {
    this.requests.push(request);
    if (this.failure) throw this.failure;
    const engine = this.name;
    const context: ExecutionContext = {
      async forward(input) {
        const x = input.get(0);
        const doubled = Float32Array.from(x.data as Float32Array, (v) => v * 2);
        return NDList.of(new Tensor('float32', doubled, x.shape, 'y'));
      },
      async close() {},
    };
    return {
      name: request.name,
      engine,
      device: request.device,
      modelDir: request.modelDir,
      inputs: [{ name: 'x', dtype: 'float32', shape: [-1] }],
      outputs: [{ name: 'y', dtype: 'float32', shape: [-1] }],
      properties: request.properties,
      describe: () => ({ file: request.modelFile }),
      newExecutionContext: async () => context,
      dispose: async () => {},
    };
  }
}

function provider(
  engine: FakeEngine,
  extension: string,
  rank: number,
): EngineProvider & { loads: number } {
  const result = {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name: engine.name,
    rank,
    loads: 0,
    recognizes: (files: readonly string[]) => files.some((f) => f.endsWith(extension)),
    load: async () => {
      result.loads += 1;
      return engine;
    },
  };
  return result;
}

describe('loadModel', () => {
  let work: string;
  let cacheDir: string;
  let fake: FakeEngine;
  let other: FakeEngine;
  let registry: EngineRegistry;
  let fakeProvider: ReturnType<typeof provider>;
  let otherProvider: ReturnType<typeof provider>;

  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-loader-'));
    cacheDir = path.join(work, 'cache');
    fake = new FakeEngine('Fake', [CPU]);
    other = new FakeEngine('Other', [CPU, GPU0]);
    fakeProvider = provider(fake, '.fake', 10);
    otherProvider = provider(other, '.other', 5);
    registry = new EngineRegistry({});
    registry.register(fakeProvider);
    registry.register(otherProvider);
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  async function modelFolder(
    name: string,
    properties?: string,
    file = 'model.fake',
  ): Promise<string> {
    const dir = path.join(work, name);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, file), 'weights');
    if (properties !== undefined) await writeFile(path.join(dir, 'serving.properties'), properties);
    return dir;
  }

  it('recognises the engine from the files and runs the loaded model', async () => {
    const dir = await modelFolder('doubler');
    const model = await loadModel(dir, { registry, cacheDir });
    expect(model).toMatchObject({ name: 'doubler', engine: 'Fake', device: CPU, modelDir: dir });
    expect(otherProvider.loads).toBe(0);
    const context = await model.newExecutionContext();
    const out = await context.forward(
      NDList.of(new Tensor('float32', new Float32Array([1, 2]), [2])),
    );
    expect(Array.from(out.get(0).data as Float32Array)).toEqual([2, 4]);
  });

  it('hands the engine the folder, the file, the device and the option.* settings', async () => {
    const dir = await modelFolder('m', 'option.threads=2\nbatch_size=4\n');
    await loadModel(pathToFileURL(path.join(dir, 'model.fake')).href, { registry, cacheDir });
    expect(fake.requests).toHaveLength(1);
    const request = fake.requests[0]!;
    expect(request).toMatchObject({
      name: 'model',
      modelDir: dir,
      modelFile: path.join(dir, 'model.fake'),
      device: CPU,
      options: { threads: '2' },
    });
    expect(request.properties.batchSize).toBe(4);
  });

  it('loads from an archive and names the model after it', async () => {
    const archive = path.join(work, 'resnet18.zip');
    await writeFile(archive, zipSync({ inner: { 'w.other': strToU8('x') } }));
    const model = await loadModel(archive, { registry, cacheDir });
    expect(model).toMatchObject({ name: 'resnet18', engine: 'Other' });
    expect(path.basename(model.modelDir)).toBe('inner');
  });

  it('picks the engine: URL over serving.properties over recognition', async () => {
    const dir = await modelFolder('m', 'engine=Other\n');
    expect((await loadModel(dir, { registry, cacheDir })).engine).toBe('Other');
    expect((await loadModel(`::Fake=${dir}`, { registry, cacheDir })).engine).toBe('Fake');
    expect(
      (await loadModel(dir, { registry, cacheDir, overrides: { engine: 'Fake' } })).engine,
    ).toBe('Fake');
    // The URL wins over caller overrides too.
    expect(
      (await loadModel(`::Other=${dir}`, { registry, cacheDir, overrides: { engine: 'Fake' } }))
        .engine,
    ).toBe('Other');
  });

  it('picks the name: URL over serving.properties over the folder name', async () => {
    const dir = await modelFolder('folder-name', 'name=from-file\n');
    expect((await loadModel(dir, { registry, cacheDir })).name).toBe('from-file');
    expect((await loadModel(`from-url=${dir}`, { registry, cacheDir })).name).toBe('from-url');
    const plain = await modelFolder('plain.v2');
    expect((await loadModel(plain, { registry, cacheDir })).name).toBe('plain.v2');
  });

  it('lets overrides win over the file and keeps the URL fields in the properties', async () => {
    const dir = await modelFolder('m', 'batch_size=2\nmax_batch_delay=10\noption.a=file\n');
    const model = await loadModel(`m:3:Fake:cpu=${dir}`, {
      registry,
      cacheDir,
      overrides: { batch_size: '16', 'option.a': 'caller' },
    });
    expect(model.properties).toMatchObject({
      batchSize: 16,
      maxBatchDelayMs: 10,
      engine: 'Fake',
      loadOnDevices: 'cpu',
      options: { a: 'caller' },
    });
    expect(model.properties.raw.version).toBe('3');
  });

  it('picks the device: URL over options over load_on_devices, cpu by default', async () => {
    const dir = await modelFolder('m', 'engine=Other\nload_on_devices=gpu0;cpu\n');
    expect((await loadModel(dir, { registry, cacheDir })).device).toEqual(GPU0);
    expect((await loadModel(dir, { registry, cacheDir, device: 'cpu' })).device).toEqual(CPU);
    expect((await loadModel(dir, { registry, cacheDir, device: CPU })).device).toEqual(CPU);
    expect((await loadModel(`:::cpu=${dir}`, { registry, cacheDir, device: GPU0 })).device).toEqual(
      CPU,
    );
    const plain = await modelFolder('plain', 'engine=Other\n');
    expect((await loadModel(plain, { registry, cacheDir })).device).toEqual(CPU);
  });

  it('maps load_on_devices=* to a gpu only when the engine offers one', async () => {
    const withGpu = await modelFolder('a', 'engine=Other\nload_on_devices=*\n');
    expect((await loadModel(withGpu, { registry, cacheDir })).device).toEqual(GPU0);
    const cpuOnly = await modelFolder('b', 'engine=Fake\nload_on_devices=*\n');
    expect((await loadModel(cpuOnly, { registry, cacheDir })).device).toEqual(CPU);
  });

  it('refuses a device the engine does not offer', async () => {
    const dir = await modelFolder('m');
    await expect(loadModel(`:::gpu0=${dir}`, { registry, cacheDir })).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
    });
    await expect(loadModel(dir, { registry, cacheDir, device: 'tpu' })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
    expect(fake.requests).toHaveLength(0);
  });

  it('turns an engine failure into MODEL_LOAD_FAILED naming the model and keeping the cause', async () => {
    const dir = await modelFolder('broken');
    const cause = new KilnError(KilnErrorCode.UnsupportedFormat, 'opset 99 is not supported');
    fake.failure = cause;
    const error = await loadModel(dir, { registry, cacheDir }).catch((e: unknown) => e);
    expect(KilnError.is(error, KilnErrorCode.ModelLoadFailed)).toBe(true);
    const failure = error as KilnError;
    expect(failure.message).toContain('broken');
    expect(failure.message).toContain('opset 99');
    expect(failure.cause).toBe(cause);
    expect(failure.details).toMatchObject({
      model: 'broken',
      engine: 'Fake',
      causeCode: 'UNSUPPORTED_FORMAT',
    });
  });

  it('names the model when no engine fits', async () => {
    const dir = await modelFolder('mystery', undefined, 'weights.bin');
    await expect(loadModel(dir, { registry, cacheDir })).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
      message: expect.stringContaining('mystery') as unknown,
    });
    const named = await modelFolder('named', 'engine=Missing\n');
    await expect(loadModel(named, { registry, cacheDir })).rejects.toMatchObject({
      code: KilnErrorCode.EngineUnavailable,
      message: expect.stringContaining('named') as unknown,
    });
  });

  it('names the package to install for a known engine that is not registered', async () => {
    const dir = await modelFolder('torch', 'engine=PyTorch\n');
    await expect(loadModel(dir, { registry, cacheDir })).rejects.toMatchObject({
      code: KilnErrorCode.EngineUnavailable,
      message: expect.stringMatching(
        /engine PyTorch is not registered \(registered: Fake, Other\): install @kiln\/engine-libtorch/,
      ) as unknown,
    });
  });

  it('accepts a parsed ModelUrl', async () => {
    const dir = await modelFolder('m');
    const model = await loadModel(
      { name: 'given', version: undefined, engine: 'Other', device: undefined, url: dir },
      { registry, cacheDir },
    );
    expect(model).toMatchObject({ name: 'given', engine: 'Other' });
  });

  it('passes source errors through with their codes', async () => {
    await expect(loadModel('https://example.com/m.zip', { registry })).rejects.toMatchObject({
      code: KilnErrorCode.UrlNotAllowed,
    });
    await expect(loadModel(path.join(work, 'none'), { registry })).rejects.toMatchObject({
      code: KilnErrorCode.ModelNotFound,
    });
    const dir = await modelFolder('m', 'batch_size=lots\n');
    await expect(loadModel(dir, { registry })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
    });
  });
});

describe('inspectModelSource', () => {
  let work: string;
  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-inspect-'));
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  it('describes an archive and guesses its engine without loading any', async () => {
    const registry = new EngineRegistry({});
    const fakeProvider = provider(new FakeEngine('Fake', [CPU]), '.fake', 1);
    registry.register(fakeProvider);
    const archive = path.join(work, 'bert.tar.zip');
    await writeFile(
      archive,
      zipSync({ 'model.fake': strToU8('12345'), 'serving.properties': strToU8('version=7\n') }),
    );
    const info = await inspectModelSource(archive, { registry, cacheDir: path.join(work, 'c') });
    expect(info).toMatchObject({
      name: 'bert.tar',
      version: '7',
      modelFile: undefined,
      archive,
      files: ['model.fake', 'serving.properties'],
      sizeBytes: 5 + 'version=7\n'.length,
      engineName: 'Fake',
    });
    expect(fakeProvider.loads).toBe(0);
  });

  it('reports a named engine as it is, and none when nothing recognises the files', async () => {
    const dir = path.join(work, 'm');
    await mkdir(dir);
    await writeFile(path.join(dir, 'w.bin'), 'x');
    expect((await inspectModelSource(dir)).engineName).toBeUndefined();
    expect((await inspectModelSource(`x:1:PyTorch=${dir}`)).engineName).toBe('PyTorch');
    expect(await inspectModelSource(`x:1=${dir}`)).toMatchObject({ name: 'x', version: '1' });
  });
});
