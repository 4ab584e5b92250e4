import { createReadStream, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { Zip, ZipDeflate, ZipPassThrough } from 'fflate';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { PackedFile } from './model-folder-files.js';

/** fflate writes no ZIP64 records: sizes and offsets must fit 32 bits, headers included. */
export const MAX_ZIP_BYTES = 2 ** 32 - 1 - 64 * 1024 ** 2;

/**
 * Streams files into a new zip at `target` (never replacing a file there): each file is read
 * in chunks and deflated at `level` (0 stores it), so memory stays flat for large models.
 * `onBytes` hears of every chunk read, for a progress bar.
 */
export async function writeZip(
  files: readonly PackedFile[],
  target: string,
  level: number,
  onBytes: (bytes: number) => void = () => undefined,
): Promise<void> {
  const total = files.reduce((sum, f) => sum + f.bytes, 0);
  if (total > MAX_ZIP_BYTES) {
    throw new KilnError(
      KilnErrorCode.ArchiveTooLarge,
      `the model holds ${total} bytes, more than a zip without ZIP64 can (${MAX_ZIP_BYTES})`,
      {
        details: { hint: 'write a .tar.gz instead: kiln archive <dir> -o model.tar.gz' },
      },
    );
  }
  const out = createWriteStream(target, { flags: 'wx' });
  let failure: Error | undefined;
  const zip = new Zip((error, chunk, final) => {
    if (error) {
      failure = error;
      return;
    }
    out.write(chunk);
    if (final) out.end();
  });
  try {
    for (const file of files) {
      const entry =
        level === 0
          ? new ZipPassThrough(file.path)
          : new ZipDeflate(file.path, { level: level as 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 });
      entry.mtime = file.mtime;
      zip.add(entry);
      for await (const chunk of createReadStream(file.absolute)) {
        entry.push(chunk as Buffer);
        onBytes((chunk as Buffer).byteLength);
        if (failure) throw failure;
        // Wait for the disk when it falls behind, so chunks do not pile up in memory.
        if (out.writableNeedDrain) await once(out, 'drain');
      }
      entry.push(new Uint8Array(0), true);
    }
    zip.end();
    if (failure) throw failure;
    await finished(out);
  } catch (error) {
    out.destroy();
    throw error;
  }
}
