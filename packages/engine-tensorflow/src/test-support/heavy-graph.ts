import { placeholderNode, saveTfjsGraphModel } from '@kiln/testing';

/** `x` [n, n] → MatMul(x, x) chained `depth` times → `y`: enough work to notice a blocked thread. */
export function heavyGraph(dir: string, depth: number): Promise<string> {
  const nodes = [placeholderNode('x', 'DT_FLOAT', [-1, -1])];
  let last = 'x';
  for (let i = 0; i < depth; i++) {
    const name = i === depth - 1 ? 'y' : `m${i}`;
    nodes.push({ name, op: 'MatMul', input: [last, 'x'], attr: { T: { type: 'DT_FLOAT' } } });
    last = name;
  }
  return saveTfjsGraphModel(dir, {
    nodes,
    inputs: { x: { name: 'x:0', dtype: 'DT_FLOAT', shape: [-1, -1] } },
    outputs: { y: { name: 'y:0', dtype: 'DT_FLOAT', shape: [-1, -1] } },
  });
}
