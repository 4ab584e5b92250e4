import { createReadStream } from 'node:fs';
import type * as Tar from 'tar';
import type { ReadEntry } from 'tar';
import { lazyModule } from '../lazy-module.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { ArchiveWriter } from './archive-writer.js';

const tar = lazyModule<typeof Tar>('tar');

/**
 * Extracts a tar, gzipped or not (the parser recognises gzip by its magic bytes), entry by
 * entry while it streams. Any link, device, fifo or entry type the parser would skip is
 * refused: skipping could silently change what the model folder holds.
 */
export async function extractTar(archive: string, writer: ArchiveWriter): Promise<void> {
  // Size is bounded by the writer's byte count; the parser's own ratio check is turned off
  // so that limit is the only one and behaves the same for zip and tar.
  const parser = new (tar().Parser)({ strict: true, maxDecompressionRatio: Infinity });
  const input = createReadStream(archive);
  const writes: Promise<void>[] = [];
  let failure: unknown;
  let reading: ReadEntry | undefined;

  const stop = (error: unknown) => {
    if (failure !== undefined) return;
    failure = error;
    input.destroy();
    // Ends a write still waiting for data that will never come.
    reading?.destroy();
    parser.abort(new Error('extraction stopped'));
  };

  parser.on('entry', (entry: ReadEntry) => {
    if (failure !== undefined) {
      entry.resume();
      return;
    }
    let target: string | undefined;
    let isFolder: boolean;
    try {
      isFolder = tarEntryIsFolder(entry);
      target = writer.admit(entry.path, isFolder);
    } catch (error) {
      entry.resume();
      stop(error);
      return;
    }
    if (target === undefined || isFolder) {
      entry.resume();
      if (target !== undefined) writes.push(writer.makeFolder(target).catch(stop));
      return;
    }
    reading = entry;
    writes.push(
      writer.writeFile(target, entry).then(() => {
        if (reading === entry) reading = undefined;
      }, stop),
    );
  });
  parser.on('ignoredEntry', (entry: ReadEntry) => {
    stop(
      new KilnError(
        KilnErrorCode.ArchiveUnsafe,
        `entry ${JSON.stringify(entry.path)} has an unsupported type (${entry.type})`,
      ),
    );
  });

  const parsed = new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
    input.on('error', reject);
  });
  input.pipe(parser);
  await parsed.catch(stop);
  await Promise.all(writes);
  if (failure !== undefined) throw failure;
}

function tarEntryIsFolder(entry: ReadEntry): boolean {
  const unsafe = (why: string) =>
    new KilnError(KilnErrorCode.ArchiveUnsafe, `entry ${JSON.stringify(entry.path)} ${why}`);
  switch (entry.type) {
    case 'File':
    case 'OldFile':
    case 'ContiguousFile':
      // Old (v7) archives mark folders only by a trailing slash.
      return entry.path.endsWith('/');
    case 'Directory':
    case 'GNUDumpDir':
      // A GNU dump folder's data is a listing of names, which is not needed.
      return true;
    case 'SymbolicLink':
    case 'Link':
      throw unsafe('is a link');
    case 'CharacterDevice':
    case 'BlockDevice':
    case 'FIFO':
      throw unsafe('is a device or fifo');
    default:
      throw unsafe(`has an unsupported type (${entry.type})`);
  }
}
