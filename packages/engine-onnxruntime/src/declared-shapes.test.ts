import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NDList, Tensor } from '@kiln/core';
import { GraphBuilder, MODEL_FILE, tinyModel, writeModelFolder } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { namesWithoutShape } from './declared-shapes.js';
import { probeOrt } from './probe.js';
import { loadOrtModel } from './test-support/load.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-shapes-'));
});
afterAll(() => rm(root, { recursive: true, force: true }));

/** y = Relu(x + s): x declares no shape at all, s is a true scalar. */
async function undeclaredModel(dir: string): Promise<string> {
  const g = new GraphBuilder('undeclared');
  g.input('x', 'float32', null);
  g.input('s', 'float32', []);
  g.op('Relu', [g.op('Add', ['x', 's'])], {}, { output: 'y' });
  g.output('y', 'float32', null);
  return writeModelFolder(dir, g.toModel());
}

describe('namesWithoutShape', () => {
  it('finds the inputs and outputs that declare no shape, not the scalars', async () => {
    const dir = await undeclaredModel(join(root, 'scan'));
    expect([...namesWithoutShape(await readFile(join(dir, MODEL_FILE)))].sort()).toEqual([
      'x',
      'y',
    ]);
    const tiny = await tinyModel(join(root, 'tiny'));
    expect(namesWithoutShape(await readFile(join(tiny, MODEL_FILE))).size).toBe(0);
  });

  it('refuses bytes that are not protobuf rather than guess', () => {
    expect(() => namesWithoutShape(Uint8Array.of(0x3a, 0xff, 0xff, 0xff, 0x0f))).toThrow();
  });
});

describe.skipIf(!run)('a model whose signature declares no shape', () => {
  it('reports "any shape", never a 0-d scalar, and runs any rank', async () => {
    const model = await loadOrtModel(await undeclaredModel(join(root, 'run')), {});
    expect(model.inputs).toEqual([
      { name: 'x', dtype: 'float32' },
      { name: 's', dtype: 'float32', shape: [] },
    ]);
    expect(model.outputs).toEqual([{ name: 'y', dtype: 'float32' }]);
    const context = await model.newExecutionContext();
    const x = new Tensor('float32', Float32Array.of(-1, 2, -3, 4, -5, 6), [2, 3], 'x');
    const s = new Tensor('float32', Float32Array.of(1), [], 's');
    const y = (await context.forward(NDList.of(x, s))).get('y');
    expect([...y.shape]).toEqual([2, 3]);
    expect(Array.from(y.data as Float32Array)).toEqual([0, 3, 0, 5, 0, 7]);
    await expect(
      context.forward(NDList.of(x, new Tensor('float32', Float32Array.of(1, 1), [2], 's'))),
    ).rejects.toMatchObject({ code: 'SHAPE_MISMATCH' });
    await context.close();
    await model.dispose();
  });
});
