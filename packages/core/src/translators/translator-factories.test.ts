import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CPU } from '../engine/device.js';
import type { ExecutionContext } from '../engine/execution.js';
import { servingPropertiesFrom } from '../loading/serving-properties.js';
import type { Model } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { Predictor } from '../translate/predictor.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import { ImageClassificationTranslator } from './image-classification.js';
import { RawTensorTranslator } from './raw-tensors.js';
import { builtInTranslatorFactoryNames, resolveTranslator } from './translator-factories.js';

const execFileAsync = promisify(execFile);

let root: string;
let modelDir: string;

/** A model whose forward adds one to a float32 [-1,3] input `x`. */
function plusOneModel(raw: Record<string, string>, dir = modelDir): Model {
  const context: ExecutionContext = {
    async forward(input) {
      const x = input.get('x');
      return NDList.of(
        new Tensor(
          'float32',
          (x.data as Float32Array).map((v) => v + 1),
          x.shape,
        ),
      );
    },
    async close() {},
  };
  return {
    name: 'plus-one',
    engine: 'test',
    device: CPU,
    modelDir: dir,
    inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 3] }],
    outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 3] }],
    properties: servingPropertiesFrom(raw),
    describe: () => ({}),
    newExecutionContext: async () => context,
    dispose: async () => {},
  };
}

/** A plugin that reads `{"values": [...]}` and answers the scaled sum of the model's output. */
const SUM_PLUGIN = `
export default {
  name: 'json-sum',
  newInstance(model, args, kit) {
    const scale = Number(args.scale ?? '1');
    return {
      batchifier: new kit.StackBatchifier(),
      processInput(ctx, input) {
        const { values } = JSON.parse(new TextDecoder().decode(input.body));
        if (!Array.isArray(values) || values.length !== 3) {
          throw new kit.KilnError(kit.KilnErrorCode.InvalidInput, 'values must hold 3 numbers');
        }
        return kit.NDList.of(new kit.Tensor('float32', Float32Array.from(values), [1, 3], model.inputs[0].name));
      },
      processOutput(ctx, output) {
        const sum = Array.from(output.get(0).data).reduce((a, b) => a + b, 0);
        return { type: 'json', value: { sum: sum * scale } };
      },
    };
  },
};
`;

async function write(relative: string, text: string): Promise<void> {
  await mkdir(path.dirname(path.join(modelDir, relative)), { recursive: true });
  await writeFile(path.join(modelDir, relative), text);
}

describe('resolveTranslator', () => {
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'kiln-translators-'));
    modelDir = path.join(root, 'model');
    await mkdir(modelDir);
    await writeFile(path.join(root, 'outside.mjs'), SUM_PLUGIN);
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('gives raw tensors by default and for the raw names', async () => {
    expect(await resolveTranslator(plusOneModel({}))).toBeInstanceOf(RawTensorTranslator);
    expect(await resolveTranslator(plusOneModel({ translatorFactory: 'raw' }))).toBeInstanceOf(
      RawTensorTranslator,
    );
    const djl = plusOneModel({
      translatorFactory: 'ai.djl.translate.NoopServingTranslatorFactory',
    });
    expect(await resolveTranslator(djl)).toBeInstanceOf(RawTensorTranslator);
  });

  it('picks the image translator by name, DJL class name or application', async () => {
    const image = { name: 'x', dtype: 'float32', shape: [-1, 3, 32, 32] } as const;
    const imageModel = (raw: Record<string, string>) => ({ ...plusOneModel(raw), inputs: [image] });
    const choices: Record<string, string>[] = [
      { translatorFactory: 'image-classification' },
      { translatorFactory: 'ai.djl.modality.cv.translator.ImageClassificationTranslatorFactory' },
      { application: 'image_classification' },
      { application: 'cv/image_classification' },
    ];
    for (const raw of choices) {
      expect(await resolveTranslator(imageModel(raw))).toBeInstanceOf(
        ImageClassificationTranslator,
      );
    }
    const translator = await resolveTranslator(
      imageModel({ application: 'cv/image_classification', topK: '2' }),
    );
    expect((translator as ImageClassificationTranslator).options).toMatchObject({
      topK: 2,
      width: 32,
    });
  });

  it('lists the built-in names for an unknown factory', async () => {
    const error = await resolveTranslator(
      plusOneModel({ translatorFactory: 'com.example.Missing' }),
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_CONFIG' });
    for (const name of builtInTranslatorFactoryNames())
      expect((error as Error).message).toContain(name);
  });

  it('offers extra factories by name', async () => {
    const raw = new RawTensorTranslator();
    const translator = await resolveTranslator(plusOneModel({ translatorFactory: 'mine' }), {
      factories: [{ name: 'mine', newInstance: () => raw }],
    });
    expect(translator).toBe(raw);
  });

  it('loads an .mjs plugin from the model folder and runs it through a Predictor', async () => {
    await write('sum-translator.mjs', SUM_PLUGIN);
    const model = plusOneModel({ translatorFactory: 'sum-translator.mjs', scale: '10' });
    const predictor = await Predictor.create<ServingInput, ServingOutput>(
      model,
      await resolveTranslator(model),
    );
    try {
      const encode = (value: unknown) => ({
        body: new TextEncoder().encode(JSON.stringify(value)),
      });
      const results = await predictor.batchPredictSettled([
        encode({ values: [1, 2, 3] }),
        encode({ values: [1] }),
        encode({ values: [0, 0, 0.5] }),
      ]);
      expect(results[0]).toEqual({ ok: true, value: { type: 'json', value: { sum: 90 } } });
      expect(results[1]).toMatchObject({
        ok: false,
        error: { code: 'INVALID_INPUT', message: 'values must hold 3 numbers' },
      });
      expect(results[2]).toEqual({ ok: true, value: { type: 'json', value: { sum: 35 } } });
    } finally {
      await predictor.close();
    }
  });

  it('loads a CommonJS plugin and a default-exported class', async () => {
    await write(
      'plugins/noop.cjs',
      `module.exports = { translatorFactory: { newInstance: (model, args, kit) => new kit.RawTensorTranslator() } };`,
    );
    expect(
      await resolveTranslator(plusOneModel({ translatorFactory: 'plugins/noop.cjs' })),
    ).toBeInstanceOf(RawTensorTranslator);
    await write(
      'class-factory.mjs',
      `export default class Factory { newInstance(model, args, kit) { return kit.ImageClassificationTranslator.forModel(model, args); } }`,
    );
    const image = {
      ...plusOneModel({ translatorFactory: 'class-factory.mjs' }),
      inputs: [{ name: 'x', dtype: 'float32', shape: [1, 3, 8, 8] }],
    } as Model;
    expect(await resolveTranslator(image)).toBeInstanceOf(ImageClassificationTranslator);
  });

  it('imports the plugin again after it changes', async () => {
    const body = (answer: number) =>
      `{ newInstance: () => ({ batchifier: null, processInput: () => { throw new Error('unused'); }, processOutput: () => ({ type: 'json', value: ${answer} }) }) }`;
    const sources: Record<string, (answer: number) => string> = {
      'versioned.mjs': (answer) => `export const translatorFactory = ${body(answer)};`,
      'versioned.cjs': (answer) => `module.exports = ${body(answer)};`,
    };
    for (const [file, source] of Object.entries(sources)) {
      const model = plusOneModel({ translatorFactory: file });
      const ctx = { model, arguments: {} };
      await write(file, source(1));
      expect((await resolveTranslator(model)).processOutput(ctx, NDList.of(), {})).toEqual({
        type: 'json',
        value: 1,
      });
      await write(file, source(22));
      expect((await resolveTranslator(model)).processOutput(ctx, NDList.of(), {})).toEqual({
        type: 'json',
        value: 22,
      });
    }
  });

  it('re-imports an edited CommonJS plugin under plain Node too', async () => {
    // Vitest loads modules its own way; Node's CommonJS cache is what a server meets.
    const script = path.join(root, 'reload-check.mts');
    const loader = pathToFileURL(path.join(import.meta.dirname, 'translator-plugin.ts')).href;
    await writeFile(
      script,
      `import { writeFile } from 'node:fs/promises';
import { loadTranslatorPlugin } from ${JSON.stringify(loader)};
const answers = [];
for (const answer of [1, 2]) {
  await writeFile(${JSON.stringify(path.join(modelDir, 'native.cjs'))}, 'module.exports = { newInstance: () => ({ batchifier: null, processInput() {}, processOutput: () => ' + answer + ' }) };');
  const factory = await loadTranslatorPlugin(${JSON.stringify(modelDir)}, 'native.cjs');
  answers.push((await factory.newInstance({}, {})).processOutput());
}
console.log(JSON.stringify(answers));
`,
    );
    const { stdout } = await execFileAsync(
      process.execPath,
      ['--conditions=@kiln/source', '--import', 'tsx', script],
      {
        cwd: import.meta.dirname,
      },
    );
    expect(JSON.parse(stdout)).toEqual([1, 2]);
  });

  it('refuses plugin paths that leave the model folder', async () => {
    const attempt = (translatorFactory: string) =>
      resolveTranslator(plusOneModel({ translatorFactory })).catch((e: unknown) => e);
    expect(await attempt('../outside.mjs')).toMatchObject({ code: 'ARCHIVE_UNSAFE' });
    expect(await attempt('plugins/../../outside.mjs')).toMatchObject({ code: 'ARCHIVE_UNSAFE' });
    expect(await attempt(path.join(root, 'outside.mjs'))).toMatchObject({ code: 'INVALID_CONFIG' });
    expect(await attempt(`file://${path.join(root, 'outside.mjs')}`)).toMatchObject({
      code: 'INVALID_CONFIG',
    });
    await symlink(path.join(root, 'outside.mjs'), path.join(modelDir, 'linked.mjs'));
    expect(await attempt('linked.mjs')).toMatchObject({ code: 'ARCHIVE_UNSAFE' });
    expect(await attempt('missing.mjs')).toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('does not exist'),
    });
  });

  it('explains plugins that export or return the wrong thing', async () => {
    const attempt = (translatorFactory: string) =>
      resolveTranslator(plusOneModel({ translatorFactory })).catch((e: unknown) => e);
    await write('nothing.mjs', `export const helper = 1;`);
    expect(await attempt('nothing.mjs')).toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('exports helper'),
    });
    await write('half.mjs', `export default { newInstance: () => ({ processInput() {} }) };`);
    const half = (await attempt('half.mjs')) as Error;
    expect(half).toMatchObject({ code: 'INVALID_CONFIG' });
    expect(half.message).toContain('processOutput');
    expect(half.message).toContain('batchifier is missing');
    await write('broken.mjs', `export default {{{`);
    expect(await attempt('broken.mjs')).toMatchObject({
      code: 'INVALID_CONFIG',
      message: expect.stringContaining('cannot load translator plugin broken.mjs'),
    });
    await write(
      'throws.mjs',
      `export default { newInstance() { throw new Error('no labels'); } };`,
    );
    expect(await attempt('throws.mjs')).toMatchObject({
      code: 'MODEL_LOAD_FAILED',
      message: expect.stringContaining('no labels'),
    });
  });
});
