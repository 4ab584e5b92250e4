import { readdir } from 'node:fs/promises';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** JSON files DLR skips when it looks for the graph (SageMaker's side files, versions). */
const AUXILIARY_JSON = new Set(['model-shapes.json', 'hyperparams.json', 'version.json']);
const LIBRARY = /\.(so|dylib|dll)$/i;

/** What DLR will load from a folder: the compiled library plus a graph and params, or Relay VM code. */
export interface DlrFolderFiles {
  readonly library: string;
  readonly graph: string | undefined;
  readonly params: string | undefined;
  readonly bytecode: string | undefined;
}

/** Picks DLR's files from top-level names (DLR does not look into subfolders). */
export function dlrFolderFiles(fileNames: readonly string[]): Partial<DlrFolderFiles> {
  const top = fileNames.filter((name) => !name.includes('/') && !name.includes('\\'));
  return {
    library: top.find((n) => LIBRARY.test(n)),
    graph: top.find(
      (n) => n.toLowerCase().endsWith('.json') && !AUXILIARY_JSON.has(n.toLowerCase()),
    ),
    params: top.find((n) => n.toLowerCase().endsWith('.params')),
    bytecode: top.find((n) => n.toLowerCase().endsWith('.ro')),
  };
}

/**
 * Whether a model folder holds a TVM-compiled model: a compiled library with a graph JSON and
 * params (graph executor), or with Relay VM bytecode (`.ro`).
 */
export function isDlrModelListing(fileNames: readonly string[]): boolean {
  const files = dlrFolderFiles(fileNames);
  return (
    files.library !== undefined &&
    ((files.graph !== undefined && files.params !== undefined) || files.bytecode !== undefined)
  );
}

/**
 * Checks that DLR can be pointed at `modelDir`. Throws MODEL_NOT_FOUND when the folder cannot
 * be read, MODEL_LOAD_FAILED naming what is missing, or INVALID_CONFIG for a path DLR would
 * misread (it splits model paths at ':').
 */
export async function inspectDlrFolder(modelDir: string): Promise<DlrFolderFiles> {
  if (modelDir.includes(':') && process.platform !== 'win32') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `DLR cannot load ${modelDir}: it splits model paths at ':'; move the model to a path without one`,
    );
  }
  let names: string[];
  try {
    names = await readdir(modelDir);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.ModelNotFound,
      `cannot read model folder ${modelDir}`,
    );
  }
  const files = dlrFolderFiles(names);
  if (!isDlrModelListing(names)) {
    const missing = [
      files.library ? undefined : 'a compiled library (.so)',
      files.graph || files.bytecode ? undefined : 'a graph (.json) or Relay VM code (.ro)',
      files.params || files.bytecode ? undefined : 'parameters (.params)',
    ].filter(Boolean);
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `${modelDir} is not a TVM-compiled model folder: it lacks ${missing.join(', ')} (has: ${names.slice(0, 20).join(', ') || 'nothing'})`,
    );
  }
  return files as DlrFolderFiles;
}
