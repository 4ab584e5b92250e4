import type { Stats } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KilnError, KilnErrorCode } from '../errors.js';
import { archiveFormatOf, extractArchive, type ExtractArchiveOptions } from './archive-extract.js';
import { DEFAULT_MAX_MODEL_FILES, listModelFiles } from './model-files.js';

export {
  DEFAULT_MAX_ARCHIVE_BYTES,
  DEFAULT_MAX_ARCHIVE_ENTRIES,
  defaultModelCacheDir,
  stripModelExtension,
} from './archive-extract.js';

/**
 * Archive options. `maxArchiveEntries`, when above 10000, also raises how many files a model
 * folder may list.
 */
export type ResolveModelSourceOptions = ExtractArchiveOptions;

/** Where a model's files are on local disk. */
export interface ModelSource {
  /** Absolute folder holding the model files. */
  readonly dir: string;
  /** Absolute path of the model file when the URL named a single file. */
  readonly modelFile?: string;
  /** Files under `dir` as relative POSIX paths, sorted (just the model file for a file URL). */
  readonly files: string[];
  /** Total size of `files` in bytes. */
  readonly sizeBytes: number;
  /** Absolute path of the archive the folder was extracted from. */
  readonly archive?: string;
}

/**
 * Finds a model on local disk: a `file://` URL or a path (absolute, or relative to the
 * working directory) naming a folder, a model file, or a `.zip`, `.tar`, `.tar.gz`/`.tgz`
 * archive, which is extracted into the cache (see extractArchive). Never uses the network:
 * other schemes are URL_NOT_ALLOWED.
 */
export async function resolveModelSource(
  url: string,
  options: ResolveModelSourceOptions = {},
): Promise<ModelSource> {
  const location = localPath(url);
  const info = await statModel(location);
  // Listing admits as many files as an archive may hold entries, and never fewer than the
  // folder default.
  const maxEntries = Math.max(DEFAULT_MAX_MODEL_FILES, options.maxArchiveEntries ?? 0);
  if (info.isDirectory()) {
    return { dir: location, ...(await listModelFiles(location, { maxEntries })) };
  }
  if (!info.isFile()) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `model location ${location} is neither a file nor a folder`,
    );
  }
  const format = archiveFormatOf(location);
  if (format === undefined) {
    return {
      dir: path.dirname(location),
      modelFile: location,
      files: [path.basename(location)],
      sizeBytes: info.size,
    };
  }
  const extracted = await extractArchive(location, format, options);
  const dir = await nestedModelFolder(extracted);
  return { dir, archive: location, ...(await listModelFiles(dir, { maxEntries })) };
}

/** The local path a model URL names; remote schemes are refused. */
function localPath(url: string): string {
  const text = url.trim();
  if (text === '') throw new KilnError(KilnErrorCode.InvalidInput, 'model location is empty');
  const remote = (what: string) =>
    new KilnError(
      KilnErrorCode.UrlNotAllowed,
      `model URL ${text} is remote (${what}): @kiln/core loads local models only; download it first and pass its local path`,
    );
  if (/^file:/i.test(text)) {
    try {
      return fileURLToPath(new URL(text));
    } catch (error) {
      // file://host/… names a file on another machine.
      if ((error as NodeJS.ErrnoException).code === 'ERR_INVALID_FILE_URL_HOST') {
        throw remote('a file on another host');
      }
      throw KilnError.wrap(
        error,
        KilnErrorCode.InvalidInput,
        `model URL ${text} is not a valid file URL`,
      );
    }
  }
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]+):\/\//.exec(text)?.[1];
  if (scheme !== undefined) throw remote(scheme);
  return path.resolve(text);
}

async function statModel(location: string): Promise<Stats> {
  try {
    return await stat(location);
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.ModelNotFound, `no model at ${location}`);
  }
}

/**
 * An archive whose content is one top-level folder yields that folder (DJL does the same);
 * hidden entries and macOS resource forks do not count.
 */
async function nestedModelFolder(dir: string): Promise<string> {
  const visible = (await readdir(dir, { withFileTypes: true })).filter(
    (entry) => !entry.name.startsWith('.') && entry.name !== '__MACOSX',
  );
  const only = visible.length === 1 ? visible[0] : undefined;
  return only?.isDirectory() ? path.join(dir, only.name) : dir;
}
