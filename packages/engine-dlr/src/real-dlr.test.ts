import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CPU,
  type DType,
  type Model,
  NDList,
  Tensor,
  allocate,
  readServingProperties,
  shapeSize,
} from '@kiln/core';
import { DlrEngine } from './dlr-engine.js';

// A real libdlr with a real TVM-compiled model folder, when the environment names both:
//   KILN_DLR_REAL_LIBRARY=/path/to/libdlr.so KILN_DLR_REAL_MODEL=/path/to/compiled-model
// Dynamic dimensions are given KILN_DLR_REAL_DIM (default 1).

const libraryPath = process.env.KILN_DLR_REAL_LIBRARY;
const modelDir = process.env.KILN_DLR_REAL_MODEL;
const skipReason =
  !libraryPath || !modelDir
    ? 'set KILN_DLR_REAL_LIBRARY and KILN_DLR_REAL_MODEL to run against a real DLR and model'
    : undefined;
if (skipReason) console.warn(`[kiln] skipping the real-DLR test: ${skipReason}`);

describe.skipIf(skipReason !== undefined)('a real libdlr and TVM-compiled model', () => {
  let engine: DlrEngine;
  let model: Model;
  const dim = Number(process.env.KILN_DLR_REAL_DIM ?? 1);

  beforeAll(async () => {
    engine = await DlrEngine.load({ libraryPath, env: {} });
    const properties = await readServingProperties(modelDir!);
    model = await engine.loadModel({
      name: 'real',
      modelDir: modelDir!,
      device: CPU,
      options: properties.options,
      properties,
    });
  });
  afterAll(() => model?.dispose());

  const inputs = () =>
    new NDList(
      model.inputs.map((d) => {
        const shape = d.shape!.map((n) => (n < 0 ? dim : n));
        return new Tensor(d.dtype as DType, allocate(d.dtype!, shapeSize(shape)), shape, d.name);
      }),
    );

  it('loads, reporting a version and typed inputs and outputs', () => {
    expect(engine.version).toMatch(/\d/);
    expect(model.inputs.length).toBeGreaterThan(0);
    expect(model.outputs.length).toBeGreaterThan(0);
  });

  it('runs, returning each declared output with its dtype and a matching element count', async () => {
    const context = await model.newExecutionContext();
    const output = await context.forward(inputs());
    expect(output.length).toBe(model.outputs.length);
    output.tensors.forEach((tensor, i) => {
      expect(tensor.dtype).toBe(model.outputs[i]!.dtype);
      expect(tensor.size).toBe(shapeSize(tensor.shape));
    });
    await context.close();
  });

  it('gives the same answer from two contexts running at once', async () => {
    const contexts = await Promise.all([model.newExecutionContext(), model.newExecutionContext()]);
    const [a, b] = await Promise.all(contexts.map((c) => c.forward(inputs())));
    a!.tensors.forEach((tensor, i) => {
      expect(Array.from(tensor.data as ArrayLike<unknown>)).toEqual(
        Array.from(b!.get(i).data as ArrayLike<unknown>),
      );
    });
    await Promise.all(contexts.map((c) => c.close()));
  });
});
