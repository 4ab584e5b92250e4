import { placeholderNode, saveTfjsGraphModel } from '@kiln/testing';

/** `condition` bool [-1] → Where → `indices` [-1, 1]: a dynamic op, so tfjs runs it asynchronously. */
export function whereGraph(dir: string): Promise<string> {
  return saveTfjsGraphModel(dir, {
    nodes: [
      placeholderNode('condition', 'DT_BOOL', [-1]),
      { name: 'indices', op: 'Where', input: ['condition'], attr: { T: { type: 'DT_BOOL' } } },
    ],
    inputs: { condition: { name: 'condition:0', dtype: 'DT_BOOL', shape: [-1] } },
    outputs: { indices: { name: 'indices:0', dtype: 'DT_INT64', shape: [-1, 1] } },
  });
}

/** `a` · `b` with both [-1, -1]: shapes that pass Kiln's checks can still fail inside tfjs. */
export function matMulGraph(dir: string): Promise<string> {
  return saveTfjsGraphModel(dir, {
    nodes: [
      placeholderNode('a', 'DT_FLOAT', [-1, -1]),
      placeholderNode('b', 'DT_FLOAT', [-1, -1]),
      {
        name: 'product',
        op: 'MatMul',
        input: ['a', 'b'],
        attr: { T: { type: 'DT_FLOAT' }, transpose_a: { b: false }, transpose_b: { b: false } },
      },
    ],
    inputs: {
      a: { name: 'a:0', dtype: 'DT_FLOAT', shape: [-1, -1] },
      b: { name: 'b:0', dtype: 'DT_FLOAT', shape: [-1, -1] },
    },
    outputs: { product: { name: 'product:0', dtype: 'DT_FLOAT', shape: [-1, -1] } },
  });
}

/** `re`, `im` float32 [-1] → Complex → `z` complex64, a dtype Kiln has no type for. */
export function complexGraph(dir: string): Promise<string> {
  return saveTfjsGraphModel(dir, {
    nodes: [
      placeholderNode('re', 'DT_FLOAT', [-1]),
      placeholderNode('im', 'DT_FLOAT', [-1]),
      {
        name: 'z',
        op: 'Complex',
        input: ['re', 'im'],
        attr: { T: { type: 'DT_FLOAT' }, Tout: { type: 'DT_COMPLEX64' } },
      },
    ],
    inputs: {
      re: { name: 're:0', dtype: 'DT_FLOAT', shape: [-1] },
      im: { name: 'im:0', dtype: 'DT_FLOAT', shape: [-1] },
    },
    outputs: { z: { name: 'z:0', dtype: 'DT_COMPLEX64', shape: [-1] } },
  });
}
