import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { addDenseLayers } from '../dense-layers.js';
import { GraphBuilder } from '../graph-builder.js';
import { writeModelFolder } from '../model-folder.js';
import { SeededRandom } from '../random.js';
import { irisData } from './iris-data.js';
import { type TrainedClassifier, accuracy, trainClassifier } from './train-classifier.js';

export interface IrisDemo {
  readonly dir: string;
  /** setosa, versicolor, virginica: the order of the model's probabilities. */
  readonly classes: readonly string[];
  readonly trainAccuracy: number;
  readonly holdoutAccuracy: number;
  readonly trainRows: number;
  readonly holdoutRows: number;
}

export interface IrisDemoOptions {
  readonly seed?: number;
  /** Share of each class held out from training, for the holdout accuracy. */
  readonly holdoutShare?: number;
}

const TRANSLATOR = new URL('./translator.mjs', import.meta.url);

/**
 * Trains a small classifier on Fisher's Iris data and writes a model folder that Kiln serves
 * as is: `model.onnx` (`features` float32 [batch, 4] in centimetres → `probabilities`
 * float32 [batch, 3], normalisation and Softmax inside the graph), `synset.txt`,
 * `translator.mjs` (JSON in, ranked classes out) and `serving.properties`.
 */
export async function buildIrisDemo(dir: string, options: IrisDemoOptions = {}): Promise<IrisDemo> {
  const { rows, labels, classes } = irisData();
  const random = new SeededRandom(options.seed ?? 42);
  const { train, holdout } = stratifiedSplit(labels, options.holdoutShare ?? 0.2, random);
  const pick = (indices: number[]) => ({
    rows: indices.map((i) => rows[i]!),
    labels: indices.map((i) => labels[i]!),
  });
  const trainSet = pick(train);
  const holdoutSet = pick(holdout);

  const model = trainClassifier(trainSet.rows, trainSet.labels, {
    hidden: 8,
    classes: classes.length,
    epochs: 400,
    learningRate: 0.1,
    momentum: 0.9,
    seed: options.seed ?? 42,
  });

  await writeModelFolder(dir, irisGraph(model, classes.length), {
    translatorFactory: 'translator.mjs',
    batch_size: '8',
    max_batch_delay: '5',
  });
  await writeFile(join(dir, 'synset.txt'), `${classes.join('\n')}\n`);
  await copyFile(TRANSLATOR, join(dir, 'translator.mjs'));
  return {
    dir,
    classes,
    trainAccuracy: accuracy(model, trainSet.rows, trainSet.labels),
    holdoutAccuracy: accuracy(model, holdoutSet.rows, holdoutSet.labels),
    trainRows: train.length,
    holdoutRows: holdout.length,
  };
}

function irisGraph(model: TrainedClassifier, classes: number) {
  const g = new GraphBuilder('iris');
  g.input('features', 'float32', ['batch', 4]);
  const normalised = g.op('Div', [
    g.op('Sub', ['features', g.initializer('feature_mean', 'float32', [4], model.mean)]),
    g.initializer('feature_std', 'float32', [4], model.std),
  ]);
  addDenseLayers(g, normalised, model.layers, { softmax: true, output: 'probabilities' });
  g.output('probabilities', 'float32', ['batch', classes]);
  return g.toModel({
    docString:
      'Iris classifier: sepal length, sepal width, petal length, petal width (cm) → class probabilities',
  });
}

/** Holds out the same share of every class, so the holdout set is balanced like the data. */
function stratifiedSplit(
  labels: readonly number[],
  share: number,
  random: SeededRandom,
): { train: number[]; holdout: number[] } {
  const train: number[] = [];
  const holdout: number[] = [];
  for (const label of new Set(labels)) {
    const members = random.shuffle(labels.flatMap((l, i) => (l === label ? [i] : [])));
    const cut = Math.round(members.length * share);
    holdout.push(...members.slice(0, cut));
    train.push(...members.slice(cut));
  }
  return { train: train.sort((a, b) => a - b), holdout: holdout.sort((a, b) => a - b) };
}
