import { stat } from 'node:fs/promises';
import { KilnError, KilnErrorCode, findModelFile as findFile } from '@kiln/core';
import { findTransformersJsFile } from './transformers-js-file.js';

/**
 * The .onnx file to load, by core's one lookup rule (named file, option.modelName, names);
 * a folder without one at its top (a transformers.js or Optimum export) gives its
 * `onnx/` file for option.dtype (see findTransformersJsFile), as does any folder when
 * option.dtype is set.
 */
export async function findModelFile(
  modelDir: string,
  name: string,
  modelFile?: string,
  modelName?: string,
  dtype?: string,
): Promise<string> {
  const find = () =>
    findFile(modelDir, { name, modelName, modelFile, extensions: ['.onnx'], format: 'ONNX' });
  if (modelFile || modelName) return find();
  if (dtype !== undefined) {
    const file = await findTransformersJsFile(modelDir, dtype);
    if (file) return file;
    throw new KilnError(
      KilnErrorCode.ModelNotFound,
      `option.dtype needs the model in ${modelDir}/onnx/, as transformers.js keeps it`,
    );
  }
  try {
    return await find();
  } catch (error) {
    if (!(error instanceof KilnError && error.code === KilnErrorCode.ModelNotFound)) throw error;
    const file = await findTransformersJsFile(modelDir, undefined);
    if (file) return file;
    throw error;
  }
}

/** The model's bytes, its external data (`<file>_data`, Optimum's name) included. */
export async function modelFileBytes(path: string): Promise<number> {
  const { size } = await stat(path);
  const external = await stat(`${path}_data`).catch(() => undefined);
  return size + (external?.isFile() ? external.size : 0);
}
