import { CPU } from '../engine/device.js';
import { servingPropertiesFrom } from '../loading/serving-properties.js';
import type { Model, TensorDescriptor } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';

/**
 * A model whose forward returns its first input doubled and unnamed, recording each forward's
 * row count in `forwards`: naming by the model's outputs, batching and splitting all show in
 * the result. `width`: the rows' declared width (-1: any).
 */
export function doublingModel(forwards: number[], width = -1): Model {
  const shape = [-1, width];
  const inputs: TensorDescriptor[] = [{ name: 'x', dtype: 'float32', shape }];
  return {
    name: 'double',
    engine: 'test',
    device: CPU,
    modelDir: '/nonexistent',
    inputs,
    outputs: [{ name: 'y', dtype: 'float32', shape }],
    properties: servingPropertiesFrom({}),
    describe: () => ({}),
    newExecutionContext: async () => ({
      async forward(input: NDList) {
        const x = input.get(0);
        forwards.push(x.shape[0]!);
        return NDList.of(
          new Tensor(
            'float32',
            (x.data as Float32Array).map((v) => v * 2),
            x.shape,
          ),
        );
      },
      async close() {},
    }),
    dispose: async () => {},
  };
}
