import { type FindModelFileOptions, findModelFile as findFile, hasExtension } from '@kiln/core';

const EXTENSIONS = ['.pt', '.torchscript'];

export function isTorchScriptFile(name: string): boolean {
  return hasExtension(name, EXTENSIONS);
}

/** The TorchScript file to load, by core's one lookup rule (named file, option.modelName, names). */
export function findModelFile(
  modelDir: string,
  name: string,
  modelFile?: string,
  modelName?: string,
): Promise<string> {
  const options: FindModelFileOptions = {
    name,
    modelName,
    modelFile,
    extensions: EXTENSIONS,
    format: 'TorchScript',
  };
  return findFile(modelDir, options);
}
