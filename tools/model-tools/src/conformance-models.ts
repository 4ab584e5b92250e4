import type { DType } from '@kiln/core';
import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';

/** `x` (dtype, [batch, 4]) → Identity → `y`. */
export async function identityModel(dir: string, dtype: DType): Promise<string> {
  const g = new GraphBuilder(`identity_${dtype}`);
  g.input('x', dtype, ['batch', 4]);
  g.op('Identity', ['x'], {}, { output: 'y' });
  g.output('y', dtype, ['batch', 4]);
  return writeModelFolder(dir, g.toModel({ docString: `identity of ${dtype}` }));
}

/** `a`, `b` float32 [batch, 3] → `sum` = a + b, `product` = a · b (element-wise), in that order. */
export async function addMulModel(dir: string): Promise<string> {
  const g = new GraphBuilder('add_mul');
  g.input('a', 'float32', ['batch', 3]);
  g.input('b', 'float32', ['batch', 3]);
  g.op('Add', ['a', 'b'], {}, { output: 'sum' });
  g.op('Mul', ['a', 'b'], {}, { output: 'product' });
  g.output('sum', 'float32', ['batch', 3]);
  g.output('product', 'float32', ['batch', 3]);
  return writeModelFolder(dir, g.toModel());
}

export interface AffineModel {
  readonly dir: string;
  /** 4×2: y = x · weights + bias. */
  readonly weights: number[][];
  readonly bias: number[];
}

/** Exactly representable in float32, so expected outputs can be computed in JS and compared exactly. */
const AFFINE_WEIGHTS = [
  [0.5, -1],
  [1.5, 2],
  [-0.25, 0.75],
  [2, -0.5],
];
const AFFINE_BIAS = [0.125, -3];

/** `x` float32 [batch, 4] → `y` float32 [batch, 2] = x · W + b with known W and b. */
export async function affineModel(dir: string): Promise<AffineModel> {
  const g = new GraphBuilder('affine');
  g.input('x', 'float32', ['batch', 4]);
  const w = g.initializer('weights', 'float32', [4, 2], Float32Array.from(AFFINE_WEIGHTS.flat()));
  const b = g.initializer('bias', 'float32', [2], Float32Array.from(AFFINE_BIAS));
  g.op('Add', [g.op('MatMul', ['x', w]), b], {}, { output: 'y' });
  g.output('y', 'float32', ['batch', 2]);
  await writeModelFolder(dir, g.toModel());
  return { dir, weights: AFFINE_WEIGHTS.map((row) => [...row]), bias: [...AFFINE_BIAS] };
}
