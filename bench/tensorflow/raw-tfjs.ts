/**
 * The baseline: what an application writes without Kiln — tfjs on its own thread with the
 * same backend, `model.predict` inside `tf.tidy`, reading the result synchronously.
 */
import { createRequire } from 'node:module';
import { dirname, join, sep } from 'node:path';
import { fileSystemLoadHandler } from '@kiln/engine-tensorflow';
import type * as Tfjs from '@tensorflow/tfjs';
import type { Contender } from '../harness/interleave.js';

export type Tf = typeof Tfjs;

/** tfjs in this thread on `backend`, the wasm binaries taken from the installed package. */
export async function rawTfjs(backend: 'wasm' | 'cpu'): Promise<Tf> {
  const namespace = (await import('@tensorflow/tfjs')) as Tf & { default?: Tf };
  const tf = namespace.default ?? namespace;
  if (backend === 'wasm') {
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    wasm.setWasmPaths(
      dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm')) + sep,
    );
  }
  if (!(await tf.setBackend(backend)))
    throw new Error(`tfjs could not start its ${backend} backend`);
  await tf.ready();
  return tf;
}

export async function rawTfjsContender(
  name: string,
  tf: Tf,
  modelDir: string,
  input: Float32Array,
  shape: readonly number[],
): Promise<Contender & { close(): void }> {
  const model = await tf.loadLayersModel(fileSystemLoadHandler(tf, join(modelDir, 'model.json')));
  return {
    name,
    call: () =>
      Promise.resolve(
        tf.tidy(() => (model.predict(tf.tensor(input, [...shape])) as Tfjs.Tensor).dataSync()),
      ),
    close: () => model.dispose(),
  };
}
