import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, realpath, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';
import { ArchiveWriter, extractionError, type ArchiveLimits } from './archive-writer.js';
import { extractTar } from './tar-extract.js';
import { extractZip } from './zip-extract.js';

export const DEFAULT_MAX_ARCHIVE_BYTES = 4 * 1024 ** 3;
export const DEFAULT_MAX_ARCHIVE_ENTRIES = 10_000;

export type ArchiveFormat = 'zip' | 'tar';

export interface ExtractArchiveOptions {
  /** Where extractions are kept and reused. Default `os.tmpdir()/kiln-models`. */
  cacheDir?: string;
  /** Most bytes an archive may expand to. Default 4 GiB. */
  maxArchiveBytes?: number;
  /** Most entries an archive may hold. Default 10000. */
  maxArchiveEntries?: number;
}

export function defaultModelCacheDir(): string {
  return path.join(os.tmpdir(), 'kiln-models');
}

/** The archive format a file name announces (`.zip`, `.tar`, `.tar.gz`, `.tgz`), if any. */
export function archiveFormatOf(file: string): ArchiveFormat | undefined {
  const name = file.toLowerCase();
  if (name.endsWith('.zip')) return 'zip';
  if (name.endsWith('.tar') || name.endsWith('.tar.gz') || name.endsWith('.tgz')) return 'tar';
  return undefined;
}

/** A file name without its archive or model-file extension: `resnet18.tar.gz` → `resnet18`. */
export function stripModelExtension(file: string): string {
  const name = path.basename(file);
  const stripped = name.replace(/(\.tar\.gz|\.tgz|\.tar|\.zip)$/i, '');
  return stripped !== name ? stripped : path.parse(name).name;
}

// Extractions under way in this process, by target folder, so concurrent loads share one.
const running = new Map<string, Promise<void>>();

/**
 * Extracts an archive into the cache and returns the folder. The folder's name comes from
 * the archive's real path, size and modification time, so an unchanged archive is extracted
 * once and reused. Extraction goes to a temporary folder renamed into place when complete:
 * the cache never shows a partial extraction, and a refused one leaves nothing behind.
 */
export async function extractArchive(
  archive: string,
  format: ArchiveFormat,
  options: ExtractArchiveOptions = {},
): Promise<string> {
  const limits = archiveLimits(options);
  const cacheDir = path.resolve(options.cacheDir ?? defaultModelCacheDir());
  await ensureOwnedFolder(cacheDir);
  const real = await realpath(archive);
  const info = await stat(real);
  const key = createHash('sha256')
    .update(JSON.stringify([real, info.size, info.mtimeMs]))
    .digest('hex')
    .slice(0, 16);
  const target = path.join(cacheDir, `${cacheName(real)}-${key}`);
  if (await isFolder(target)) return target;
  let job = running.get(target);
  if (job === undefined) {
    job = extractInto(real, format, target, key, limits).finally(() => running.delete(target));
    running.set(target, job);
  }
  await job;
  return target;
}

async function extractInto(
  archive: string,
  format: ArchiveFormat,
  target: string,
  key: string,
  limits: ArchiveLimits,
): Promise<void> {
  const partial = await mkdtemp(path.join(path.dirname(target), `.partial-${key}-`));
  try {
    const writer = new ArchiveWriter(partial, limits);
    await (format === 'zip' ? extractZip : extractTar)(archive, writer);
    await rename(partial, target);
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    // Another process finished the same extraction first: use theirs.
    if (isRenameCollision(error) && (await isFolder(target))) return;
    const reason = extractionError(error);
    // File-system messages name the temporary folder; entry names are what explain them.
    const message = reason.message.replaceAll(`${partial}${path.sep}`, '');
    throw new KilnError(reason.code, `cannot extract ${archive}: ${message}`, {
      cause: error,
    });
  }
}

function archiveLimits(options: ExtractArchiveOptions): ArchiveLimits {
  const limit = (value: number | undefined, fallback: number, name: string) => {
    if (value === undefined) return fallback;
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new KilnError(KilnErrorCode.InvalidConfig, `${name} must be an integer ≥ 0`);
    }
    return value;
  };
  return {
    maxBytes: limit(options.maxArchiveBytes, DEFAULT_MAX_ARCHIVE_BYTES, 'maxArchiveBytes'),
    maxEntries: limit(options.maxArchiveEntries, DEFAULT_MAX_ARCHIVE_ENTRIES, 'maxArchiveEntries'),
  };
}

/**
 * Creates the cache folder, or checks that an existing one belongs to this user: reused
 * extractions are trusted, so nobody else may be able to plant one.
 */
async function ensureOwnedFolder(dir: string): Promise<void> {
  let info;
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    info = await stat(dir);
  } catch (error) {
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, `cannot use model cache ${dir}`);
  }
  const uid = process.getuid?.();
  if (!info.isDirectory() || (uid !== undefined && info.uid !== uid)) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `model cache ${dir} must be a folder owned by the user running Kiln (uid ${uid})`,
    );
  }
}

function cacheName(archive: string): string {
  const safe = stripModelExtension(archive)
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^\.+/, '')
    .slice(0, 64);
  return safe || 'model';
}

async function isFolder(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory();
  } catch {
    return false;
  }
}

function isRenameCollision(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return (
    (code === 'EEXIST' || code === 'ENOTEMPTY') &&
    (error as NodeJS.ErrnoException).syscall === 'rename'
  );
}
