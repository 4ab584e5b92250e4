import path from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';
import { MAX_MODEL_DEPTH } from './model-files.js';

/**
 * Checks an archive entry's name and returns it as a relative POSIX path inside the
 * extraction folder, or undefined for the archive's own root (`./`). Backslashes count as
 * separators (some zip writers use them). Refuses with ARCHIVE_UNSAFE: NUL bytes, absolute
 * paths, drive letters, `..` that still escapes after normalisation, and nesting deeper than
 * a model folder may be.
 */
export function archiveEntryPath(name: string): string | undefined {
  const unsafe = (why: string) =>
    new KilnError(KilnErrorCode.ArchiveUnsafe, `entry ${JSON.stringify(name)} ${why}`);
  if (name.includes('\0')) throw unsafe('contains a NUL byte');
  const slashed = name.replace(/\\/g, '/');
  if (/^[a-zA-Z]:/.test(slashed)) throw unsafe('names a drive');
  if (slashed.startsWith('/')) throw unsafe('is an absolute path');
  const normal = path.posix.normalize(slashed).replace(/\/+$/, '');
  if (normal === '..' || normal.startsWith('../')) throw unsafe('escapes the extraction folder');
  if (normal === '' || normal === '.') return undefined;
  if (normal.split('/').length > MAX_MODEL_DEPTH + 1) {
    throw unsafe(`nests deeper than ${MAX_MODEL_DEPTH} folders`);
  }
  return normal;
}
