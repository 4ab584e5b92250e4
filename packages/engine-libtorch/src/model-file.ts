import { type FindModelFileOptions, findModelFile as findFile, hasExtension } from '@kiln/core';

const EXTENSIONS = ['.pt', '.torchscript'];

export function isTorchScriptFile(name: string): boolean {
  return hasExtension(name, EXTENSIONS);
}

/** The TorchScript file to load: the named file, `<name>.pt`, `model.pt`, or the only one. */
export function findModelFile(modelDir: string, name: string, modelFile?: string): Promise<string> {
  const options: FindModelFileOptions = {
    name,
    modelFile,
    extensions: EXTENSIONS,
    format: 'TorchScript',
  };
  return findFile(modelDir, options);
}
