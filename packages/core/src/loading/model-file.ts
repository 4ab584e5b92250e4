import { readdir, stat } from 'node:fs/promises';
import { basename, isAbsolute, join } from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';

export interface FindModelFileOptions {
  /** The model's name: `<name><ext>` is preferred. */
  readonly name: string;
  /**
   * DJL's `option.modelName`: the file name prefix when it differs from the folder's name;
   * `<modelName><ext>` is preferred over every other name.
   */
  readonly modelName?: string | undefined;
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
 * The file names an engine tries in a folder, preferred first: `<option.modelName><ext>`, then
 * `<model name><ext>`, `<folder name><ext>` and `model<ext>`, for each of the format's
 * extensions. One rule for every engine (DJL's, plus `model<ext>`).
 */
export function preferredModelFileNames(
  modelDir: string,
  options: Pick<FindModelFileOptions, 'name' | 'modelName' | 'extensions'>,
): string[] {
  const stems = [options.modelName, options.name, basename(modelDir), 'model'].filter(
    (stem): stem is string => stem !== undefined && stem !== '',
  );
  const names = stems.flatMap((stem) => options.extensions.map((ext) => `${stem}${ext}`));
  return [...new Set(names)];
}

/**
 * The model file an engine loads from a folder, as DJL picks it: the file the request names,
 * else the first of `preferredModelFileNames` present, else the only file of the format.
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
  const preferred = preferredModelFileNames(modelDir, options);
  const pick =
    preferred.find((f) => candidates.includes(f)) ??
    (candidates.length === 1 ? candidates[0] : undefined);
  if (pick) return join(modelDir, pick);
  const [ext] = options.extensions;
  throw new KilnError(
    candidates.length === 0 ? KilnErrorCode.ModelNotFound : KilnErrorCode.ModelLoadFailed,
    candidates.length === 0
      ? `no ${options.format} file (${options.extensions.join(', ')}) in ${modelDir}`
      : `${modelDir} holds several ${options.format} files (${candidates.join(', ')}); name one ${options.name}${ext} or model${ext}, or pick one with option.modelName`,
  );
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}
