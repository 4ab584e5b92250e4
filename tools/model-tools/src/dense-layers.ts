import { attr } from './attributes.js';
import type { GraphBuilder } from './graph-builder.js';

/** One fully connected layer: `weights` is inputs × outputs, row-major. */
export interface DenseLayer {
  readonly weights: Float32Array;
  readonly bias: Float32Array;
  readonly inputs: number;
  readonly outputs: number;
}

/**
 * Adds MatMul + Add per layer with ReLU between layers (not after the last one); returns the
 * last layer's output. Optionally ends with Softmax over the last axis.
 */
export function addDenseLayers(
  g: GraphBuilder,
  input: string,
  layers: readonly DenseLayer[],
  options: { softmax?: boolean; output?: string } = {},
): string {
  let x = input;
  layers.forEach((layer, i) => {
    const w = g.weight('dense_weight', [layer.inputs, layer.outputs], layer.weights);
    const b = g.weight('dense_bias', [layer.outputs], layer.bias);
    const last = i === layers.length - 1;
    const name = last && !options.softmax ? options.output : undefined;
    x = g.op('Add', [g.op('MatMul', [x, w]), b], {}, name ? { output: name } : {});
    if (!last) x = g.op('Relu', [x]);
  });
  if (options.softmax) {
    x = g.op(
      'Softmax',
      [x],
      { axis: attr.int(-1) },
      options.output ? { output: options.output } : {},
    );
  }
  return x;
}
