import { attr } from './attributes.js';
import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';
import { SeededRandom } from './random.js';

export interface SlowModelOptions {
  /**
   * Milliseconds one 512×512×512 MatMul takes where the model will run. The default was
   * measured on an x86-64 core with one intra-op thread (two threads take about half as
   * long); pass a value measured on the target to get closer to `targetMs`.
   */
  readonly matmulMs?: number;
  readonly seed?: number;
}

export interface SlowModel {
  readonly dir: string;
  /** MatMuls in the chain. */
  readonly layers: number;
}

const SIZE = 512;
export const DEFAULT_MATMUL_512_MS = 1.6;

/**
 * `x` float32 [batch, 4] → `y` float32 [batch, 4], taking roughly `targetMs` per run
 * whatever the batch: a chain of 512×512 MatMuls whose work depends on `x` (so it cannot be
 * folded away at load time). The weight is a signed permutation matrix — orthogonal, so
 * values neither overflow nor fade into slow denormals however long the chain — that the
 * runtime must still multiply densely. `y` = x + mean of the chain's result.
 */
export async function slowModel(
  dir: string,
  targetMs: number,
  options: SlowModelOptions = {},
): Promise<SlowModel> {
  const layers = Math.max(1, Math.round(targetMs / (options.matmulMs ?? DEFAULT_MATMUL_512_MS)));
  const random = new SeededRandom(options.seed ?? 7);
  const g = new GraphBuilder('slow');
  g.input('x', 'float32', ['batch', 4]);

  const start = g.weight('start', [SIZE, SIZE], random.normalArray(SIZE * SIZE, 1));
  const weight = g.weight('signed_permutation', [SIZE, SIZE], signedPermutation(SIZE, random));
  const gain = g.op('ReduceMean', ['x'], { axes: attr.ints([0, 1]), keepdims: attr.int(0) });
  let h = g.op('Mul', [start, gain]);
  for (let i = 0; i < layers; i++) h = g.op('MatMul', [h, weight]);
  const summary = g.op('ReduceMean', [h], { axes: attr.ints([0, 1]), keepdims: attr.int(1) });
  g.op('Add', ['x', summary], {}, { output: 'y' });
  g.output('y', 'float32', ['batch', 4]);
  await writeModelFolder(dir, g.toModel({ docString: `${layers} chained ${SIZE}² MatMuls` }));
  return { dir, layers };
}

function signedPermutation(size: number, random: SeededRandom): Float32Array {
  const out = new Float32Array(size * size);
  const order = random.shuffle(Array.from({ length: size }, (_, i) => i));
  order.forEach((column, row) => (out[row * size + column] = random.next() < 0.5 ? -1 : 1));
  return out;
}
