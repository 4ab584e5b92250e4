import { readdir, stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

const EXTENSIONS = ['.pt', '.torchscript'];

export function isTorchScriptFile(name: string): boolean {
  const lower = name.toLowerCase();
  return EXTENSIONS.some((ext) => lower.endsWith(ext));
}

/**
 * The TorchScript file to load, as DJL picks it: the file the request names, else
 * `<name>.pt`, else `model.pt`, else the only .pt/.torchscript file in the folder.
 */
export async function findModelFile(
  modelDir: string,
  name: string,
  modelFile?: string,
): Promise<string> {
  if (modelFile) {
    const path = isAbsolute(modelFile) ? modelFile : join(modelDir, modelFile);
    if (!(await isFile(path)))
      throw new KilnError(KilnErrorCode.ModelNotFound, `model file ${path} does not exist`);
    return path;
  }
  let entries: string[];
  try {
    entries = await readdir(modelDir);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.ModelNotFound,
      `cannot read model folder ${modelDir}`,
    );
  }
  const candidates = entries.filter(isTorchScriptFile);
  const pick =
    [`${name}.pt`, `${name}.torchscript`, 'model.pt'].find((f) => candidates.includes(f)) ??
    (candidates.length === 1 ? candidates[0] : undefined);
  if (pick) return join(modelDir, pick);
  throw new KilnError(
    candidates.length === 0 ? KilnErrorCode.ModelNotFound : KilnErrorCode.ModelLoadFailed,
    candidates.length === 0
      ? `no .pt or .torchscript file in ${modelDir}`
      : `${modelDir} holds several TorchScript files (${candidates.join(', ')}); name one ${name}.pt or model.pt, or pick one with the model file option`,
  );
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
