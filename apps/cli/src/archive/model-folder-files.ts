import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode, MAX_MODEL_DEPTH } from '@kiln/core';

/** A regular file of a model folder, as it goes into an archive. */
export interface PackedFile {
  /** Relative POSIX path: the archive entry name. */
  readonly path: string;
  readonly absolute: string;
  readonly bytes: number;
  readonly mtime: Date;
}

/** Files an archive may hold: the loader lists no more than this by default. */
export const MAX_PACKED_FILES = 10_000;

/**
 * Lists what an archive of `dir` would hold: regular files only, sorted. A symlink, a device
 * or a socket anywhere in the folder is ARCHIVE_UNSAFE: a link could pull files from outside
 * the folder into the archive, and the loader refuses links in archives anyway.
 */
export async function listPackedFiles(dir: string): Promise<PackedFile[]> {
  const root = await lstat(dir).catch((error: unknown) => {
    throw KilnError.wrap(error, KilnErrorCode.ModelNotFound, `no model folder at ${dir}`);
  });
  if (!root.isDirectory()) {
    throw new KilnError(KilnErrorCode.InvalidInput, `${dir} is not a folder`, {
      details: {
        hint: 'kiln archive packs a model folder (its model file, serving.properties and translator plugin)',
      },
    });
  }
  const files: PackedFile[] = [];
  let seen = 0;
  const pending = [{ abs: dir, rel: '', depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    for (const entry of await readdir(next.abs, { withFileTypes: true })) {
      if (++seen > MAX_PACKED_FILES) {
        throw new KilnError(
          KilnErrorCode.ArchiveTooLarge,
          `${dir} holds more than ${MAX_PACKED_FILES} files and folders`,
        );
      }
      const abs = path.join(next.abs, entry.name);
      const rel = next.rel + entry.name;
      if (entry.isSymbolicLink()) {
        throw new KilnError(
          KilnErrorCode.ArchiveUnsafe,
          `${rel} is a symbolic link: an archive carries regular files only`,
          {
            details: {
              hint: `replace the link with a copy of the file it points to, or remove it`,
            },
          },
        );
      }
      if (entry.isDirectory()) {
        if (next.depth + 1 > MAX_MODEL_DEPTH) {
          throw new KilnError(
            KilnErrorCode.ArchiveUnsafe,
            `${rel} nests deeper than ${MAX_MODEL_DEPTH} folders`,
          );
        }
        pending.push({ abs, rel: `${rel}/`, depth: next.depth + 1 });
        continue;
      }
      if (!entry.isFile()) {
        throw new KilnError(
          KilnErrorCode.ArchiveUnsafe,
          `${rel} is not a regular file (a device, socket or pipe)`,
        );
      }
      const info = await lstat(abs);
      files.push({ path: rel, absolute: abs, bytes: info.size, mtime: info.mtime });
    }
  }
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
