import { stat } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode, preferredModelFileNames } from '@kiln/core';

export const TFJS_MODEL_FILE = 'model.json';
export const SAVED_MODEL_FILES = ['saved_model.pb', 'saved_model.pbtxt'] as const;

/** Where a TensorFlow model's files are: a TF.js model.json, or a SavedModel folder. */
export type LocatedModel =
  | { readonly kind: 'tfjs'; readonly file: string }
  | { readonly kind: 'saved-model'; readonly dir: string };

/** The names a model goes by when Kiln looks for its files: core's one lookup rule. */
export interface ModelNames {
  /** The model's name (URL, serving.properties or folder). */
  readonly name: string;
  /** DJL's `option.modelName`: the file name prefix when it differs from the folder's. */
  readonly modelName?: string | undefined;
}

/**
 * Finds the model in a folder: `modelFile` when given (a model.json, a saved_model.pb or a
 * SavedModel folder, relative to the folder), else a TF.js `<name>.json` by core's rule
 * (`<option.modelName>.json`, `<model name>.json`, `<folder name>.json`, `model.json` — as npm
 * packages of TF.js models ship `emotion/emotion.json`), else saved_model.pb(txt).
 */
export async function locateModel(
  modelDir: string,
  modelFile: string | undefined,
  names: ModelNames,
): Promise<LocatedModel> {
  if (modelFile !== undefined) return locateNamed(path.resolve(modelDir, modelFile), names);
  const candidates = preferredModelFileNames(modelDir, { ...names, extensions: ['.json'] });
  for (const candidate of candidates) {
    const json = path.join(modelDir, candidate);
    if (await isFile(json)) return { kind: 'tfjs', file: json };
  }
  for (const name of SAVED_MODEL_FILES) {
    if (await isFile(path.join(modelDir, name))) return { kind: 'saved-model', dir: modelDir };
  }
  throw new KilnError(
    KilnErrorCode.ModelLoadFailed,
    `no TensorFlow model in ${modelDir}: looked for ${candidates.join(', ')} (TF.js graph or layers model) and ${SAVED_MODEL_FILES.join(' / ')} (SavedModel)`,
  );
}

async function locateNamed(target: string, names: ModelNames): Promise<LocatedModel> {
  const info = await stat(target).catch(() => undefined);
  if (info?.isDirectory()) return locateModel(target, undefined, names);
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
