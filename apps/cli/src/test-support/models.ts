import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadOrt } from '@kiln/engine-onnxruntime';
import { buildIrisDemo, mlpModel, tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';

/** Whether ONNX Runtime runs here (the CLI tests' real models need it). */
export async function ortAvailable(): Promise<boolean> {
  const { run } = await checkEngine('OnnxRuntime', async () => {
    await loadOrt();
    return null;
  });
  return run;
}

export interface TestModels {
  readonly root: string;
  /** `x` [batch, 4] → `y`: Relu(x + bias). */
  readonly tiny: string;
  /** `x` [batch, 16] → dense 32 → `logits` [batch, 3]. */
  readonly mlp: string;
  /** The Iris demo: JSON in, ranked classes out, through a translator plugin. */
  readonly iris: string;
  remove(): Promise<void>;
}

/** Real models in a fresh temporary folder, made with @kiln/model-tools. */
export async function makeTestModels(prefix: string): Promise<TestModels> {
  const root = await mkdtemp(path.join(os.tmpdir(), prefix));
  const tiny = await tinyModel(path.join(root, 'tiny'));
  const { dir: mlp } = await mlpModel(path.join(root, 'mlp'), {
    inputSize: 16,
    hidden: [32],
    outputSize: 3,
  });
  const { dir: iris } = await buildIrisDemo(path.join(root, 'iris'));
  return { root, tiny, mlp, iris, remove: () => rm(root, { recursive: true, force: true }) };
}
