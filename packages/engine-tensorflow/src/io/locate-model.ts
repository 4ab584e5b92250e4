import { stat } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

export const TFJS_MODEL_FILE = 'model.json';
export const SAVED_MODEL_FILES = ['saved_model.pb', 'saved_model.pbtxt'] as const;

/** Where a TensorFlow model's files are: a TF.js model.json, or a SavedModel folder. */
export type LocatedModel =
  | { readonly kind: 'tfjs'; readonly file: string }
  | { readonly kind: 'saved-model'; readonly dir: string };

/**
 * Finds the model in a folder: `modelFile` when given (a model.json, a saved_model.pb or a
 * SavedModel folder, relative to the folder), else model.json, else saved_model.pb(txt).
 */
export async function locateModel(modelDir: string, modelFile?: string): Promise<LocatedModel> {
  if (modelFile !== undefined) return locateNamed(path.resolve(modelDir, modelFile));
  const json = path.join(modelDir, TFJS_MODEL_FILE);
  if (await isFile(json)) return { kind: 'tfjs', file: json };
  for (const name of SAVED_MODEL_FILES) {
    if (await isFile(path.join(modelDir, name))) return { kind: 'saved-model', dir: modelDir };
  }
  throw new KilnError(
    KilnErrorCode.ModelLoadFailed,
    `no TensorFlow model in ${modelDir}: looked for ${TFJS_MODEL_FILE} (TF.js graph or layers model) and ${SAVED_MODEL_FILES.join(' / ')} (SavedModel)`,
  );
}

async function locateNamed(target: string): Promise<LocatedModel> {
  const info = await stat(target).catch(() => undefined);
  if (info?.isDirectory()) return locateModel(target);
  if (info?.isFile()) {
    if ((SAVED_MODEL_FILES as readonly string[]).includes(path.basename(target))) {
      return { kind: 'saved-model', dir: path.dirname(target) };
    }
    if (target.endsWith('.json')) return { kind: 'tfjs', file: target };
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `${target} is not a TensorFlow model file (expected a TF.js model.json or a SavedModel's ${SAVED_MODEL_FILES[0]})`,
    );
  }
  throw new KilnError(KilnErrorCode.ModelLoadFailed, `model file ${target} does not exist`);
}

async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() === true;
}
