import type { DenseLayer } from '../dense-layers.js';
import { SeededRandom } from '../random.js';

export interface TrainingOptions {
  readonly hidden: number;
  readonly classes: number;
  readonly epochs: number;
  readonly learningRate: number;
  /** Momentum of the gradient descent. */
  readonly momentum: number;
  readonly seed: number;
}

export interface TrainedClassifier {
  /** Per-feature mean and standard deviation the network expects inputs normalised by. */
  readonly mean: Float32Array;
  readonly std: Float32Array;
  /** Hidden layer (ReLU) then output layer (logits). */
  readonly layers: readonly [DenseLayer, DenseLayer];
}

/**
 * Trains a one-hidden-layer ReLU network with softmax cross-entropy by full-batch gradient
 * descent with momentum. Plain loops: the data sets this is for have a few hundred rows.
 */
export function trainClassifier(
  rows: readonly (readonly number[])[],
  labels: readonly number[],
  options: TrainingOptions,
): TrainedClassifier {
  const features = rows[0]!.length;
  const { mean, std } = standardisation(rows);
  const x = rows.map((row) => row.map((v, j) => (v - mean[j]!) / std[j]!));
  const random = new SeededRandom(options.seed);
  const hidden = dense(features, options.hidden, random);
  const output = dense(options.hidden, options.classes, random);
  const params = [hidden.weights, hidden.bias, output.weights, output.bias];
  const velocity = params.map((p) => new Float32Array(p.length));

  for (let epoch = 0; epoch < options.epochs; epoch++) {
    const grads = params.map((p) => new Float32Array(p.length));
    const [gW1, gB1, gW2, gB2] = grads as [Float32Array, Float32Array, Float32Array, Float32Array];
    x.forEach((row, n) => {
      const { activations, probabilities } = forward(row, hidden, output);
      const delta = probabilities.map((p, k) => p - (k === labels[n] ? 1 : 0));
      const back = new Float64Array(options.hidden);
      for (let k = 0; k < options.classes; k++) {
        gB2[k]! += delta[k]!;
        for (let h = 0; h < options.hidden; h++) {
          gW2[h * options.classes + k]! += activations[h]! * delta[k]!;
          back[h]! += output.weights[h * options.classes + k]! * delta[k]!;
        }
      }
      for (let h = 0; h < options.hidden; h++) {
        if (activations[h]! <= 0) continue;
        gB1[h]! += back[h]!;
        for (let j = 0; j < features; j++) gW1[j * options.hidden + h]! += row[j]! * back[h]!;
      }
    });
    params.forEach((p, i) => {
      const v = velocity[i]!;
      const g = grads[i]!;
      for (let j = 0; j < p.length; j++) {
        v[j] = options.momentum * v[j]! - (options.learningRate * g[j]!) / x.length;
        p[j]! += v[j]!;
      }
    });
  }
  return { mean, std, layers: [hidden, output] };
}

/** Index of the most probable class for a raw (not yet normalised) row. */
export function predictClass(model: TrainedClassifier, row: readonly number[]): number {
  const normalised = row.map((v, j) => (v - model.mean[j]!) / model.std[j]!);
  const { probabilities } = forward(normalised, model.layers[0], model.layers[1]);
  return probabilities.indexOf(Math.max(...probabilities));
}

export function accuracy(
  model: TrainedClassifier,
  rows: readonly (readonly number[])[],
  labels: readonly number[],
): number {
  const correct = rows.filter((row, i) => predictClass(model, row) === labels[i]).length;
  return correct / rows.length;
}

function forward(
  row: readonly number[],
  hidden: DenseLayer,
  output: DenseLayer,
): { activations: number[]; probabilities: number[] } {
  const activations = affine(row, hidden).map((v) => Math.max(0, v));
  const logits = affine(activations, output);
  const top = Math.max(...logits);
  const exps = logits.map((v) => Math.exp(v - top));
  const sum = exps.reduce((a, b) => a + b, 0);
  return { activations, probabilities: exps.map((e) => e / sum) };
}

function affine(input: readonly number[], layer: DenseLayer): number[] {
  return Array.from({ length: layer.outputs }, (_, k) => {
    let sum = layer.bias[k]!;
    for (let j = 0; j < layer.inputs; j++) sum += input[j]! * layer.weights[j * layer.outputs + k]!;
    return sum;
  });
}

function dense(inputs: number, outputs: number, random: SeededRandom): DenseLayer {
  return {
    inputs,
    outputs,
    weights: random.normalArray(inputs * outputs, Math.sqrt(2 / inputs)),
    bias: new Float32Array(outputs),
  };
}

function standardisation(rows: readonly (readonly number[])[]): {
  mean: Float32Array;
  std: Float32Array;
} {
  const features = rows[0]!.length;
  const mean = new Float32Array(features);
  const std = new Float32Array(features);
  for (let j = 0; j < features; j++) {
    const column = rows.map((r) => r[j]!);
    const m = column.reduce((a, b) => a + b, 0) / column.length;
    mean[j] = m;
    std[j] = Math.sqrt(column.reduce((a, b) => a + (b - m) ** 2, 0) / column.length) || 1;
  }
  return { mean, std };
}
