import { findModelFile as findFile } from '@kiln/core';

/** The .onnx file to load, by core's one lookup rule (named file, option.modelName, names). */
export function findModelFile(
  modelDir: string,
  name: string,
  modelFile?: string,
  modelName?: string,
): Promise<string> {
  return findFile(modelDir, { name, modelName, modelFile, extensions: ['.onnx'], format: 'ONNX' });
}
