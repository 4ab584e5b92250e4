import { mkdir, open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';
import { archiveEntryPath } from './archive-entry-path.js';

export interface ArchiveLimits {
  /** Most bytes written for all entries together, counted as they stream. */
  readonly maxBytes: number;
  /** Most entries (files, folders and anything else) the archive may hold. */
  readonly maxEntries: number;
}

/**
 * Writes one archive's entries under a fresh folder and enforces its limits. Only regular
 * files and folders are ever created, so no link can redirect a later write; files are
 * created exclusively, so a repeated name cannot overwrite an earlier entry.
 */
export class ArchiveWriter {
  private entries = 0;
  private bytes = 0;

  constructor(
    readonly root: string,
    private readonly limits: ArchiveLimits,
  ) {}

  /** Refuses early when the archive itself declares too many entries. */
  expectEntries(declared: number): void {
    if (declared > this.limits.maxEntries) this.tooManyEntries();
  }

  /** Counts one entry and returns where it goes, or undefined for the archive's root folder. */
  admit(name: string, isFolder: boolean): string | undefined {
    this.entries += 1;
    if (this.entries > this.limits.maxEntries) this.tooManyEntries();
    const relative = archiveEntryPath(name);
    if (relative !== undefined) return path.join(this.root, relative);
    if (isFolder) return undefined;
    throw new KilnError(
      KilnErrorCode.ArchiveUnsafe,
      `file entry ${JSON.stringify(name)} names the extraction folder itself`,
    );
  }

  async makeFolder(target: string): Promise<void> {
    await mkdir(target, { recursive: true });
  }

  /** Streams chunks into a new file; returns the bytes written. */
  async writeFile(target: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
    await mkdir(path.dirname(target), { recursive: true });
    const handle = await open(target, 'wx', 0o644);
    let written = 0;
    try {
      for await (const chunk of chunks) {
        // Counted before writing, so the limit is never overshot on disk.
        this.bytes += chunk.byteLength;
        if (this.bytes > this.limits.maxBytes) {
          throw new KilnError(
            KilnErrorCode.ArchiveTooLarge,
            `archive expands to more than ${this.limits.maxBytes} bytes`,
          );
        }
        await writeAll(handle, chunk);
        written += chunk.byteLength;
      }
    } finally {
      await handle.close();
    }
    return written;
  }

  private tooManyEntries(): never {
    throw new KilnError(
      KilnErrorCode.ArchiveTooLarge,
      `archive holds more than ${this.limits.maxEntries} entries`,
    );
  }
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  for (let offset = 0; offset < chunk.byteLength;) {
    const { bytesWritten } = await handle.write(chunk, offset);
    if (bytesWritten <= 0) throw new Error('the file system accepted no bytes');
    offset += bytesWritten;
  }
}

/** File-system errors that mean two entries claim the same place. */
const COLLISIONS = new Set(['EEXIST', 'ENOTDIR', 'EISDIR', 'ENOTEMPTY']);

/**
 * Turns whatever an extraction threw into a KilnError: ours stay as they are, colliding
 * entries and over-long names are ARCHIVE_UNSAFE, other file-system failures INTERNAL, and
 * the rest (decoder and format errors) mean a damaged archive: INVALID_INPUT.
 */
export function extractionError(error: unknown): KilnError {
  if (error instanceof KilnError) return error;
  const { code, syscall } = (error ?? {}) as NodeJS.ErrnoException;
  if (code !== undefined && COLLISIONS.has(code)) {
    return KilnError.wrap(error, KilnErrorCode.ArchiveUnsafe, 'entries collide');
  }
  if (code === 'ENAMETOOLONG') {
    return KilnError.wrap(error, KilnErrorCode.ArchiveUnsafe, 'an entry name is too long');
  }
  if (syscall !== undefined) {
    return KilnError.wrap(error, KilnErrorCode.Internal, 'extraction failed');
  }
  return KilnError.wrap(error, KilnErrorCode.InvalidInput, 'archive is damaged or not valid');
}
