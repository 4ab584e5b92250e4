import { readdir, stat } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';

export interface FindModelFileOptions {
  /** The model's name: `<name><ext>` is preferred. */
  readonly name: string;
  /** A file the request names (relative to the folder, or absolute); wins when given. */
  readonly modelFile?: string | undefined;
  /** File extensions of the engine's format, preferred first (`.pt`, `.torchscript`). */
  readonly extensions: readonly string[];
  /** The format's name for messages (`ONNX`, `TorchScript`). */
  readonly format: string;
}

/** Whether a file name has one of the extensions (case-insensitive). */
export function hasExtension(fileName: string, extensions: readonly string[]): boolean {
  const lower = fileName.toLowerCase();
  return extensions.some((ext) => lower.endsWith(ext));
}

/**
 * The model file an engine loads from a folder, as DJL picks it: the file the request names,
 * else `<name><ext>`, else `model<ext>`, else the only file of the format in the folder.
 */
export async function findModelFile(
  modelDir: string,
  options: FindModelFileOptions,
): Promise<string> {
  if (options.modelFile) {
    const path = isAbsolute(options.modelFile)
      ? options.modelFile
      : join(modelDir, options.modelFile);
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
  const candidates = entries.filter((f) => hasExtension(f, options.extensions));
  const preferred = [options.name, 'model'].flatMap((stem) =>
    options.extensions.map((ext) => `${stem}${ext}`),
  );
  const pick =
    preferred.find((f) => candidates.includes(f)) ??
    (candidates.length === 1 ? candidates[0] : undefined);
  if (pick) return join(modelDir, pick);
  const [ext] = options.extensions;
  throw new KilnError(
    candidates.length === 0 ? KilnErrorCode.ModelNotFound : KilnErrorCode.ModelLoadFailed,
    candidates.length === 0
      ? `no ${options.format} file (${options.extensions.join(', ')}) in ${modelDir}`
      : `${modelDir} holds several ${options.format} files (${candidates.join(', ')}); name one ${options.name}${ext} or model${ext}, or pick one with the model file option`,
  );
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
