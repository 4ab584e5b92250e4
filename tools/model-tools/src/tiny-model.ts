import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';

/**
 * `x` float32 [batch, 4] → `y` = Relu(x + bias): so little work that a run's time is almost
 * all per-call overhead (argument conversion, thread hops), which is what it measures.
 */
export async function tinyModel(dir: string): Promise<string> {
  const g = new GraphBuilder('tiny');
  g.input('x', 'float32', ['batch', 4]);
  const bias = g.initializer('bias', 'float32', [4], Float32Array.of(-1, 0, 1, 2));
  g.op('Relu', [g.op('Add', ['x', bias])], {}, { output: 'y' });
  g.output('y', 'float32', ['batch', 4]);
  return writeModelFolder(dir, g.toModel());
}
