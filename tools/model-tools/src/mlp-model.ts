import { type DenseLayer, addDenseLayers } from './dense-layers.js';
import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';
import { SeededRandom } from './random.js';

export interface MlpOptions {
  readonly inputSize?: number;
  /** Hidden layer widths, ReLU after each. */
  readonly hidden?: readonly number[];
  readonly outputSize?: number;
  /** Ends with Softmax (output `probabilities`) instead of raw `logits`. */
  readonly softmax?: boolean;
  readonly seed?: number;
}

export interface MlpModel {
  readonly dir: string;
  readonly inputSize: number;
  readonly outputSize: number;
  readonly outputName: string;
}

/** `x` float32 [batch, inputSize] → dense ReLU layers → `logits` (or `probabilities`) [batch, outputSize]. */
export async function mlpModel(dir: string, options: MlpOptions = {}): Promise<MlpModel> {
  const inputSize = options.inputSize ?? 784;
  const outputSize = options.outputSize ?? 10;
  const widths = [inputSize, ...(options.hidden ?? [512, 256]), outputSize];
  const random = new SeededRandom(options.seed ?? 3);
  const layers: DenseLayer[] = widths.slice(1).map((outputs, i) => {
    const inputs = widths[i]!;
    return {
      inputs,
      outputs,
      weights: random.normalArray(inputs * outputs, Math.sqrt(2 / inputs)),
      bias: random.uniformArray(outputs, -0.05, 0.05),
    };
  });
  const outputName = options.softmax ? 'probabilities' : 'logits';
  const g = new GraphBuilder('mlp');
  g.input('x', 'float32', ['batch', inputSize]);
  addDenseLayers(g, 'x', layers, { softmax: options.softmax ?? false, output: outputName });
  g.output(outputName, 'float32', ['batch', outputSize]);
  await writeModelFolder(
    dir,
    g.toModel({ docString: `MLP ${widths.join('-')}, seeded random weights` }),
  );
  return { dir, inputSize, outputSize, outputName };
}
