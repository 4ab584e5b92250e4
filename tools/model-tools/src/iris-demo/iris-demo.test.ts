import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  KilnError,
  KilnErrorCode,
  type Model,
  NDList,
  type ServingInput,
  type ServingOutput,
  StackBatchifier,
  Tensor,
  type Translator,
  type TranslatorContext,
} from '@kiln/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeOnnxModel } from '../save-model.js';
import { type IrisDemo, buildIrisDemo } from './iris-demo.js';

let root: string;
let demo: IrisDemo;
let translator: Translator<ServingInput, ServingOutput>;
let ctx: TranslatorContext;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-iris-'));
  demo = await buildIrisDemo(join(root, 'iris'));
  const plugin = (await import(pathToFileURL(join(demo.dir, 'translator.mjs')).href)) as {
    default: {
      name: string;
      newInstance(model: Model, args: object, kit: object): Promise<typeof translator>;
    };
  };
  const model = { modelDir: demo.dir } as Model;
  ctx = { model, arguments: {} };
  translator = await plugin.default.newInstance(
    model,
    {},
    { NDList, Tensor, KilnError, KilnErrorCode, StackBatchifier },
  );
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const body = (value: unknown): ServingInput => ({
  body: new TextEncoder().encode(JSON.stringify(value)),
  contentType: 'application/json',
});

describe('buildIrisDemo', () => {
  it('trains a classifier that generalises to held-out flowers', () => {
    expect(demo.trainRows).toBe(120);
    expect(demo.holdoutRows).toBe(30);
    expect(demo.trainAccuracy).toBeGreaterThan(0.95);
    expect(demo.holdoutAccuracy).toBeGreaterThanOrEqual(0.9);
  });

  it('writes the model folder Kiln serves', async () => {
    expect(await readFile(join(demo.dir, 'synset.txt'), 'utf8')).toBe(
      'setosa\nversicolor\nvirginica\n',
    );
    const properties = await readFile(join(demo.dir, 'serving.properties'), 'utf8');
    expect(properties).toContain('engine=OnnxRuntime');
    expect(properties).toContain('translatorFactory=translator.mjs');
    const graph = decodeOnnxModel(await readFile(join(demo.dir, 'model.onnx'))).graph!;
    expect(graph.input!.map((v) => v.name)).toEqual(['features']);
    expect(graph.output!.map((v) => v.name)).toEqual(['probabilities']);
    expect(graph.node!.at(-1)!.opType).toBe('Softmax');
  });
});

describe('iris translator.mjs', () => {
  it('accepts one row, a list of rows or {"features": ...}', async () => {
    for (const [value, rows] of [
      [[5.1, 3.5, 1.4, 0.2], 1],
      [
        [
          [5.1, 3.5, 1.4, 0.2],
          [6.7, 3.0, 5.2, 2.3],
        ],
        2,
      ],
      [{ features: [6.0, 2.9, 4.5, 1.5] }, 1],
    ] as const) {
      const list = await translator.processInput(ctx, body(value));
      expect(list).toBeInstanceOf(NDList);
      expect(list.get('features').dtype).toBe('float32');
      expect(list.get('features').shape).toEqual([rows, 4]);
    }
  });

  it('answers ranked classes: one list for one row, one list per row otherwise', async () => {
    const probabilities = new Tensor(
      'float32',
      Float32Array.of(0.1, 0.7, 0.2, 0.8, 0.15, 0.05),
      [2, 3],
      'probabilities',
    );
    const batch = body([
      [1, 2, 3, 4],
      [1, 2, 3, 4],
    ]);
    await translator.processInput(ctx, batch);
    const out = await translator.processOutput(ctx, new NDList([probabilities]), batch);
    expect(out.type).toBe('json');
    const value = (out as { value: { className: string; probability: number }[][] }).value;
    expect(value.map((row) => row.map((c) => c.className))).toEqual([
      ['versicolor', 'virginica', 'setosa'],
      ['setosa', 'versicolor', 'virginica'],
    ]);
    expect(value[0]![0]!.probability).toBeCloseTo(0.7);

    const single = body([1, 2, 3, 4]);
    await translator.processInput(ctx, single);
    const first = new Tensor('float32', Float32Array.of(0.1, 0.7, 0.2), [1, 3], 'probabilities');
    const one = (await translator.processOutput(ctx, new NDList([first]), single)) as {
      value: { className: string }[];
    };
    expect(one.value[0]!.className).toBe('versicolor');
  });

  it('refuses malformed bodies with INVALID_INPUT', async () => {
    const bad: unknown[] = [
      'not json',
      [1, 2, 3],
      [[1, 2, 3, 'x']],
      { rows: [] },
      [],
      [1, 2, 3, Number.NaN],
      new Array(1025).fill([1, 2, 3, 4]),
    ];
    for (const value of bad) {
      const input =
        typeof value === 'string' ? { body: new TextEncoder().encode(value) } : body(value);
      await expect(
        Promise.resolve().then(() => translator.processInput(ctx, input)),
      ).rejects.toSatisfy((error: unknown) => KilnError.is(error, KilnErrorCode.InvalidInput));
    }
  });

  it('batches requests with a stack batchifier', async () => {
    const a = await translator.processInput(ctx, body([5.1, 3.5, 1.4, 0.2]));
    const b = await translator.processInput(
      ctx,
      body([
        [6, 3, 4, 1],
        [7, 3, 5, 2],
      ]),
    );
    expect(translator.batchifier?.canBatch([a, b])).toBe(true);
    const batch = translator.batchifier!.batchify([a, b]);
    expect(batch.input.get(0).shape).toEqual([3, 4]);
    const output = new NDList([
      new Tensor('float32', new Float32Array(9), [3, 3], 'probabilities'),
    ]);
    expect(batch.unbatchify(output).map((l) => l.get(0).shape[0])).toEqual([1, 2]);
  });
});
