import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CPU,
  type DType,
  formatDevice,
  type Engine,
  EngineRegistry,
  type ExecutionContext,
  KilnError,
  type Model,
  NDList,
  Predictor,
  StackBatchifier,
  Tensor,
  type Translator,
  siblingModule,
  spawnModuleWorker,
} from '@kiln/core';
import { checkEngine } from '../engine-requirements.js';
import type { EngineConformanceOptions } from './fixtures.js';
import { readFixtureProperties } from './fixture-properties.js';
import { randomData, seededRandom } from './random-data.js';

export type { ConformanceFixtures, EngineConformanceOptions } from './fixtures.js';

/** Error codes an engine may use for inputs that do not fit the model. */
const BAD_INPUT_CODES = ['INVALID_INPUT', 'SHAPE_MISMATCH', 'UNSUPPORTED_DTYPE', 'ENGINE_ERROR'];

/** A translator that passes tensors straight through, batching with the stack batchifier. */
const tensorsTranslator: Translator<NDList, NDList> = {
  batchifier: new StackBatchifier(),
  processInput: (_ctx, input) => input,
  processOutput: (_ctx, output) => output,
};

/**
 * The per-engine conformance suite: every engine must pass the same tests on the same kinds
 * of models (dtypes, shapes, batching, errors, concurrency, worker threads). Call it with
 * top-level await from an engine package's test file.
 */
export async function describeEngineConformance(options: EngineConformanceOptions): Promise<void> {
  const availability = await checkEngine(options.engineName, options.probe);
  const device = options.device ?? CPU;
  const title = `${options.engineName} engine conformance${device.type === 'cpu' ? '' : ` on ${formatDevice(device)}`}`;
  describe.skipIf(!availability.run)(title, () => {
    let engine: Engine;
    let tmp: string;
    const open: { models: Model[]; contexts: ExecutionContext[] } = { models: [], contexts: [] };

    const load = async (modelDir: string, name = path.basename(modelDir)): Promise<Model> => {
      const properties = readFixtureProperties(modelDir);
      const model = await engine.loadModel({
        name,
        modelDir,
        device,
        options: properties.options,
        properties,
      });
      open.models.push(model);
      return model;
    };
    const contextOf = async (model: Model): Promise<ExecutionContext> => {
      const context = await model.newExecutionContext();
      open.contexts.push(context);
      return context;
    };
    const dir = (label: string) => fs.mkdtempSync(path.join(tmp, `${label}-`));

    beforeAll(async () => {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-conformance-'));
      const registry = new EngineRegistry({});
      registry.register(options.provider);
      engine = await registry.get(options.engineName);
    });

    afterAll(async () => {
      await Promise.allSettled(open.contexts.map((c) => c.close()));
      await Promise.allSettled(open.models.map((m) => m.dispose()));
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    });

    it('reports its name, version, devices and description', () => {
      expect(engine.name).toBe(options.engineName);
      expect(engine.version).toMatch(/\d/);
      expect(engine.devices().some((d) => d.type === 'cpu')).toBe(true);
      expect(engine.devices()).toContainEqual(device);
      expect(typeof engine.describe()).toBe('object');
    });

    for (const dtype of options.dtypes) {
      it(`round-trips ${dtype} exactly through an identity model`, async () => {
        const model = await load(await options.fixtures.identity(dir(`identity-${dtype}`), dtype));
        expect(model.inputs).toHaveLength(1);
        expect(model.inputs[0]).toMatchObject({ name: 'x', dtype });
        expect(model.inputs[0]!.shape).toHaveLength(2);
        expect(model.inputs[0]!.shape![1]).toBe(4);
        expect(model.outputs[0]).toMatchObject({ name: 'y', dtype });
        const context = await contextOf(model);
        for (const rows of [1, 3, 17]) {
          const data = randomData(dtype as DType, rows * 4, seededRandom(rows));
          const output = await context.forward(
            NDList.of(new Tensor(dtype as DType, data, [rows, 4], 'x')),
          );
          const y = output.get(0);
          expect(y.dtype).toBe(dtype);
          expect([...y.shape]).toEqual([rows, 4]);
          expect(Array.from(y.data as ArrayLike<unknown>)).toEqual(
            Array.from(data as ArrayLike<unknown>),
          );
        }
      });
    }

    it('describes and computes a model with named inputs and outputs', async () => {
      const model = await load(await options.fixtures.addMul(dir('add-mul')));
      expect(model.inputs.map((d) => [d.name, d.dtype, d.shape?.[1]])).toEqual([
        ['a', 'float32', 3],
        ['b', 'float32', 3],
      ]);
      expect(model.outputs.map((d) => d.name)).toEqual(['sum', 'product']);
      const context = await contextOf(model);
      const a = new Float32Array([1, 2, 3, -4, 0.5, 6]);
      const b = new Float32Array([10, 20, 30, 2, 4, -1]);
      // Inputs given out of order by name: engines must bind by name, not position.
      const output = await context.forward(
        NDList.of(new Tensor('float32', b, [2, 3], 'b'), new Tensor('float32', a, [2, 3], 'a')),
      );
      expect(output.names).toEqual(['sum', 'product']);
      expect(Array.from(output.get('sum').data as Float32Array)).toEqual(
        Array.from(a, (v, i) => v + b[i]!),
      );
      expect(Array.from(output.get('product').data as Float32Array)).toEqual(
        Array.from(a, (v, i) => v * b[i]!),
      );
    });

    it('batches inputs of different row counts through a Predictor and splits results back', async () => {
      const fixture = await options.fixtures.affine(dir('affine'));
      const model = await load(fixture.dir);
      const predictor = await Predictor.create(model, tensorsTranslator);
      const random = seededRandom(7);
      const inputs = [1, 2, 5, 1, 8].map((rows) =>
        NDList.of(
          new Tensor(
            'float32',
            Float32Array.from({ length: rows * 4 }, () => random() * 2 - 1),
            [rows, 4],
            'x',
          ),
        ),
      );
      const outputs = await predictor.batchPredict(inputs);
      outputs.forEach((out, i) => {
        const x = inputs[i]!.get(0).data as Float32Array;
        const y = out.get(0);
        expect([...y.shape]).toEqual([x.length / 4, 2]);
        const expected = affine(x, fixture.weights, fixture.bias);
        Array.from(y.data as Float32Array).forEach((v, j) =>
          expect(v).toBeCloseTo(expected[j]!, 4),
        );
      });
      await predictor.close();
    });

    it('rejects a wrong dtype, a wrong shape and a missing input with a KilnError, then still serves', async () => {
      const model = await load(await options.fixtures.addMul(dir('bad-inputs')));
      const context = await contextOf(model);
      const good = () =>
        NDList.of(
          new Tensor('float32', new Float32Array(3).fill(1), [1, 3], 'a'),
          new Tensor('float32', new Float32Array(3).fill(2), [1, 3], 'b'),
        );
      const bad = [
        NDList.of(
          new Tensor('int32', new Int32Array(3), [1, 3], 'a'),
          new Tensor('float32', new Float32Array(3), [1, 3], 'b'),
        ),
        NDList.of(
          new Tensor('float32', new Float32Array(5), [1, 5], 'a'),
          new Tensor('float32', new Float32Array(5), [1, 5], 'b'),
        ),
        NDList.of(new Tensor('float32', new Float32Array(3), [1, 3], 'a')),
      ];
      for (const input of bad) {
        const error = await context.forward(input).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(KilnError);
        expect(BAD_INPUT_CODES).toContain((error as KilnError).code);
      }
      const output = await context.forward(good());
      expect(Array.from(output.get('sum').data as Float32Array)).toEqual([3, 3, 3]);
    });

    it('keeps every result with its caller across concurrent contexts', async () => {
      const fixture = await options.fixtures.affine(dir('concurrent'));
      const model = await load(fixture.dir);
      const contexts = await Promise.all([0, 1, 2, 3].map(() => contextOf(model)));
      const random = seededRandom(11);
      await Promise.all(
        contexts.map(async (context) => {
          for (let i = 0; i < 25; i++) {
            const rows = 1 + Math.floor(random() * 6);
            const x = Float32Array.from({ length: rows * 4 }, () => random() * 4 - 2);
            const y = (
              await context.forward(NDList.of(new Tensor('float32', x, [rows, 4], 'x')))
            ).get(0);
            const expected = affine(x, fixture.weights, fixture.bias);
            Array.from(y.data as Float32Array).forEach((v, j) =>
              expect(v).toBeCloseTo(expected[j]!, 4),
            );
          }
        }),
      );
    });

    it('refuses re-entrant use of one Predictor', async () => {
      const model = await load((await options.fixtures.affine(dir('busy'))).dir);
      const predictor = await Predictor.create(model, tensorsTranslator);
      const input = NDList.of(new Tensor('float32', new Float32Array(4), [1, 4], 'x'));
      const first = predictor.predict(input);
      await expect(predictor.predict(input)).rejects.toMatchObject({ code: 'PREDICTOR_BUSY' });
      await first;
      await predictor.close();
    });

    it('fails forward after close with a KilnError, and closes idempotently', async () => {
      const model = await load((await options.fixtures.affine(dir('closed'))).dir);
      const context = await model.newExecutionContext();
      await context.close();
      await context.close();
      const input = NDList.of(new Tensor('float32', new Float32Array(4), [1, 4], 'x'));
      await expect(context.forward(input)).rejects.toBeInstanceOf(KilnError);
    });

    it('gives a KilnError for a corrupt model file', async () => {
      const source = (await options.fixtures.affine(dir('corrupt'))).dir;
      for (const file of fs.readdirSync(source, { recursive: true }) as string[]) {
        const full = path.join(source, file);
        if (fs.statSync(full).isFile() && file !== 'serving.properties')
          fs.writeFileSync(full, 'not a model\u0000\u0001');
      }
      const error = await load(source).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(KilnError);
    });

    it.skipIf(!options.providerModule)('loads and runs inside a worker thread', async () => {
      const fixture = await options.fixtures.affine(dir('worker'));
      const x = new Float32Array([1, 2, 3, 4, -1, -2, -3, -4]);
      const worker = spawnModuleWorker(siblingModule(import.meta.url, './worker-probe'), {
        workerData: {
          providerModule: options.providerModule!.href,
          engineName: options.engineName,
          device,
          modelDir: fixture.dir,
          input: x,
          shape: [2, 4],
        },
      });
      const reply = await new Promise<{
        ok: boolean;
        data?: number[];
        shape?: number[];
        message?: string;
      }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
      await worker.terminate();
      expect(reply.message).toBeUndefined();
      expect(reply.shape).toEqual([2, 2]);
      const expected = affine(x, fixture.weights, fixture.bias);
      reply.data!.forEach((v, j) => expect(v).toBeCloseTo(expected[j]!, 4));
    });
  });
}

function affine(x: Float32Array, weights: number[][], bias: number[]): number[] {
  const rows = x.length / 4;
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < bias.length; c++) {
      let sum = bias[c]!;
      for (let k = 0; k < 4; k++) sum += x[r * 4 + k]! * weights[k]![c]!;
      out.push(sum);
    }
  }
  return out;
}
