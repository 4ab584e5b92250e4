import type { Dirent } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';

/** Folder levels below a model folder that are read (archives are held to the same). */
export const MAX_MODEL_DEPTH = 32;
/** Files and folders a model folder may hold before listing it is refused. */
export const DEFAULT_MAX_MODEL_FILES = 10_000;

export interface ListModelFilesOptions {
  /** Deepest folder level read below `dir`; deeper content is refused. Default 32. */
  maxDepth?: number;
  /** Most files and folders seen before listing is refused. Default 10000. */
  maxEntries?: number;
}

export interface ModelFileListing {
  /** Regular files (symlinked files included), relative POSIX paths, sorted. */
  readonly files: string[];
  /** Their total size in bytes. */
  readonly sizeBytes: number;
}

/**
 * Lists a model folder's files. Symlinked folders are not followed (no cycles, no escaping
 * the folder); symlinks to files count as files, as model caches often use them. A folder
 * deeper or larger than the limits is refused with INVALID_INPUT rather than listed in part.
 */
export async function listModelFiles(
  dir: string,
  options: ListModelFilesOptions = {},
): Promise<ModelFileListing> {
  const maxDepth = options.maxDepth ?? MAX_MODEL_DEPTH;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_MODEL_FILES;
  const files: string[] = [];
  let sizeBytes = 0;
  let seen = 0;
  // Breadth-first over folders; each holds its depth and its relative POSIX prefix.
  const pending: { abs: string; rel: string; depth: number }[] = [{ abs: dir, rel: '', depth: 0 }];
  for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
    for (const entry of await readFolder(next.abs)) {
      seen += 1;
      if (seen > maxEntries) {
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `model folder ${dir} holds more than ${maxEntries} files and folders`,
        );
      }
      const abs = path.join(next.abs, entry.name);
      const rel = next.rel + entry.name;
      if (entry.isDirectory()) {
        if (next.depth + 1 > maxDepth) {
          throw new KilnError(
            KilnErrorCode.InvalidInput,
            `model folder ${dir} nests deeper than ${maxDepth} levels (${rel})`,
          );
        }
        pending.push({ abs, rel: `${rel}/`, depth: next.depth + 1 });
        continue;
      }
      const size = await regularFileSize(entry, abs);
      if (size === undefined) continue;
      files.push(rel);
      sizeBytes += size;
    }
  }
  files.sort();
  return { files, sizeBytes };
}

async function readFolder(abs: string): Promise<Dirent[]> {
  try {
    return await readdir(abs, { withFileTypes: true });
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.InvalidInput, `cannot list model folder ${abs}`);
  }
}

/** Size of a regular file or of a symlink's target file; undefined for anything else. */
async function regularFileSize(entry: Dirent, abs: string): Promise<number | undefined> {
  if (!entry.isFile() && !entry.isSymbolicLink()) return undefined;
  try {
    const info = await stat(abs);
    return info.isFile() ? info.size : undefined;
  } catch {
    // A dangling symlink, or a file removed while listing: not part of the model.
    return undefined;
  }
}
