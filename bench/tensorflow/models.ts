/**
 * The benchmark's two architectures, each written twice with the same weights: as a TF.js
 * layers model (saved through tfjs's own save path) and as an ONNX model (through
 * @kiln/model-tools), so the TensorFlow and ONNX Runtime engines run the same network.
 */
import { join } from 'node:path';
import {
  type DenseLayer,
  GraphBuilder,
  SeededRandom,
  addDenseLayers,
  attr,
  writeModelFolder,
} from '@kiln/model-tools';
import { loadTfjs, tfjsSaveHandler } from '@kiln/testing';
import type * as Tfjs from '@tensorflow/tfjs';

export interface TwinModel {
  readonly name: string;
  /** TF.js layers model folder (NHWC input for the CNN). */
  readonly tfjsDir: string;
  /** ONNX model folder (NCHW input for the CNN). */
  readonly onnxDir: string;
  readonly inputName: string;
  /** Shape of one example as each engine takes it. */
  readonly tfjsExample: readonly number[];
  readonly onnxExample: readonly number[];
  /** Converts one batch of TF.js input (NHWC) to the ONNX layout (NCHW). */
  toOnnxLayout(data: Float32Array, batch: number): Float32Array;
  readonly outputSize: number;
}

/** 784 → 512 → 256 → 10, ReLU between: the same layout on both engines. */
export async function writeMlpTwins(dir: string, seed = 11): Promise<TwinModel> {
  const widths = [784, 512, 256, 10];
  const random = new SeededRandom(seed);
  const layers: DenseLayer[] = widths.slice(1).map((outputs, i) => ({
    inputs: widths[i]!,
    outputs,
    weights: random.normalArray(widths[i]! * outputs, Math.sqrt(2 / widths[i]!)),
    bias: random.uniformArray(outputs, -0.05, 0.05),
  }));

  const g = new GraphBuilder('mlp');
  g.input('x', 'float32', ['batch', 784]);
  addDenseLayers(g, 'x', layers, { output: 'logits' });
  g.output('logits', 'float32', ['batch', 10]);
  const onnxDir = await writeModelFolder(
    join(dir, 'mlp-onnx'),
    g.toModel({ docString: 'bench MLP' }),
  );

  const tf = await loadTfjs();
  const x = tf.input({ shape: [784], name: 'x' });
  let y = x;
  const dense = layers.map((layer, i) =>
    tf.layers.dense({
      units: layer.outputs,
      activation: i < layers.length - 1 ? 'relu' : 'linear',
      name: `dense_${i}`,
    }),
  );
  for (const layer of dense) y = layer.apply(y) as Tfjs.SymbolicTensor;
  const model = tf.model({ inputs: x, outputs: y, name: 'mlp' });
  layers.forEach((layer, i) =>
    setWeights(tf, dense[i]!, [
      tf.tensor2d(layer.weights, [layer.inputs, layer.outputs]),
      tf.tensor1d(layer.bias),
    ]),
  );
  const tfjsDir = join(dir, 'mlp-tfjs');
  await model.save(tfjsSaveHandler(tf, tfjsDir));
  model.dispose();
  return {
    name: 'MLP 784-512-256-10',
    tfjsDir,
    onnxDir,
    inputName: 'x',
    tfjsExample: [784],
    onnxExample: [784],
    toOnnxLayout: (data) => data,
    outputSize: 10,
  };
}

/** Channels of the CNN's three 3×3 convolutions. */
const CNN_CHANNELS = [3, 32, 64, 128];

/**
 * size×size×3 → [conv 3×3 (same) + ReLU + max pool 2×2] ×2 → conv 3×3 + ReLU → global
 * average pool → dense 10. About 83 MFLOP per image at 64×64, four times that at 128×128.
 */
export async function writeCnnTwins(dir: string, size = 64, seed = 5): Promise<TwinModel> {
  const random = new SeededRandom(seed);
  // Kernels drawn in ONNX's [out, in, kh, kw] order; TF.js gets the same values transposed.
  const convs = CNN_CHANNELS.slice(1).map((out, i) => {
    const inC = CNN_CHANNELS[i]!;
    return {
      inC,
      out,
      kernel: random.normalArray(out * inC * 9, Math.sqrt(2 / (inC * 9))),
      bias: random.uniformArray(out, -0.05, 0.05),
    };
  });
  const channels = CNN_CHANNELS[CNN_CHANNELS.length - 1]!;
  const fc: DenseLayer = {
    inputs: channels,
    outputs: 10,
    weights: random.normalArray(channels * 10, Math.sqrt(1 / channels)),
    bias: random.uniformArray(10, -0.05, 0.05),
  };

  const g = new GraphBuilder('cnn');
  g.input('x', 'float32', ['batch', 3, size, size]);
  let x = 'x';
  convs.forEach((conv, i) => {
    const w = g.weight('conv_w', [conv.out, conv.inC, 3, 3], conv.kernel);
    const b = g.weight('conv_b', [conv.out], conv.bias);
    x = g.op('Relu', [
      g.op('Conv', [x, w, b], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]) }),
    ]);
    if (i < convs.length - 1) {
      x = g.op('MaxPool', [x], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]) });
    }
  });
  const pooled = g.op('Flatten', [g.op('GlobalAveragePool', [x])], { axis: attr.int(1) });
  addDenseLayers(g, pooled, [fc], { output: 'logits' });
  g.output('logits', 'float32', ['batch', 10]);
  const onnxDir = await writeModelFolder(
    join(dir, `cnn${size}-onnx`),
    g.toModel({ docString: 'bench CNN' }),
  );

  const tf = await loadTfjs();
  const input = tf.input({ shape: [size, size, 3], name: 'x' });
  let y = input;
  const convLayers = convs.map((conv, i) =>
    tf.layers.conv2d({
      filters: conv.out,
      kernelSize: 3,
      padding: 'same',
      activation: 'relu',
      name: `conv_${i}`,
    }),
  );
  convLayers.forEach((layer, i) => {
    y = layer.apply(y) as Tfjs.SymbolicTensor;
    if (i < convLayers.length - 1)
      y = tf.layers.maxPooling2d({ poolSize: 2, strides: 2 }).apply(y) as Tfjs.SymbolicTensor;
  });
  y = tf.layers.globalAveragePooling2d({}).apply(y) as Tfjs.SymbolicTensor;
  const dense = tf.layers.dense({ units: 10, name: 'logits' });
  const model = tf.model({
    inputs: input,
    outputs: dense.apply(y) as Tfjs.SymbolicTensor,
    name: 'cnn',
  });
  convs.forEach((conv, i) =>
    setWeights(tf, convLayers[i]!, [
      // [out, in, kh, kw] → [kh, kw, in, out]
      tf.tensor4d(conv.kernel, [conv.out, conv.inC, 3, 3]).transpose([2, 3, 1, 0]),
      tf.tensor1d(conv.bias),
    ]),
  );
  setWeights(tf, dense, [tf.tensor2d(fc.weights, [fc.inputs, fc.outputs]), tf.tensor1d(fc.bias)]);
  const tfjsDir = join(dir, `cnn${size}-tfjs`);
  await model.save(tfjsSaveHandler(tf, tfjsDir));
  model.dispose();
  return {
    name: `CNN ${size}×${size}×3, conv ${CNN_CHANNELS.slice(1).join('-')}`,
    tfjsDir,
    onnxDir,
    inputName: 'x',
    tfjsExample: [size, size, 3],
    onnxExample: [3, size, size],
    toOnnxLayout: (data, batch) => nhwcToNchw(data, batch, size, size, 3),
    outputSize: 10,
  };
}

function setWeights(tf: typeof Tfjs, layer: Tfjs.layers.Layer, values: Tfjs.Tensor[]): void {
  layer.setWeights(values);
  tf.dispose(values);
}

function nhwcToNchw(
  data: Float32Array,
  batch: number,
  h: number,
  w: number,
  c: number,
): Float32Array {
  const out = new Float32Array(data.length);
  for (let n = 0; n < batch; n++) {
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        for (let k = 0; k < c; k++)
          out[((n * c + k) * h + y) * w + x] = data[((n * h + y) * w + x) * c + k]!;
      }
    }
  }
  return out;
}
