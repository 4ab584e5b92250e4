import { findModelFile as findFile } from '@kiln/core';

/** The .onnx file to load: the named file, `<name>.onnx`, `model.onnx`, or the only one. */
export function findModelFile(modelDir: string, name: string, modelFile?: string): Promise<string> {
  return findFile(modelDir, { name, modelFile, extensions: ['.onnx'], format: 'ONNX' });
}
