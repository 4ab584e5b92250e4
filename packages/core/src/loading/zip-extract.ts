import type { Readable } from 'node:stream';
import type * as Yauzl from 'yauzl';
import type { Entry, ZipFile } from 'yauzl';
import { lazyModule } from '../lazy-module.js';

const yauzl = lazyModule<typeof Yauzl>('yauzl');
import { KilnError, KilnErrorCode } from '../errors.js';
import type { ArchiveWriter } from './archive-writer.js';

/** Part of yauzl 3's API that @types/yauzl (written for yauzl 2) does not declare. */
interface Yauzl3 {
  getFileNameLowLevel(
    generalPurposeBitFlag: number,
    fileName: Buffer,
    extraFields: Entry['extraFields'],
    strictFileNames: boolean,
  ): string;
}
const getFileNameLowLevel: Yauzl3['getFileNameLowLevel'] = (...args) =>
  (yauzl() as unknown as Yauzl3).getFileNameLowLevel(...args);

// Unix file types in the high 16 bits of a zip entry's external attributes.
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;

/**
 * Extracts a zip entry by entry (yauzl, streaming). Names are decoded and checked here
 * rather than by yauzl so every refusal carries Kiln's codes; sizes are counted as the data
 * streams, and an entry whose data differs from the size its directory record declares is
 * refused, since the declared sizes cannot be trusted.
 */
export async function extractZip(archive: string, writer: ArchiveWriter): Promise<void> {
  const zip = await openZip(archive);
  // An error with no read pending would otherwise be thrown from the emitter.
  let strayError: unknown;
  zip.on('error', (error: unknown) => (strayError ??= error));
  try {
    writer.expectEntries(zip.entryCount);
    for (let entry = await nextEntry(zip); entry; entry = await nextEntry(zip)) {
      const name = getFileNameLowLevel(
        entry.generalPurposeBitFlag,
        entry.fileName as unknown as Buffer,
        entry.extraFields,
        false,
      );
      const isFolder = zipEntryIsFolder(entry, name);
      const target = writer.admit(name, isFolder);
      if (target === undefined) continue;
      if (isFolder) {
        await writer.makeFolder(target);
        continue;
      }
      checkReadable(entry, name);
      const written = await writer.writeFile(target, await openEntry(zip, entry));
      if (written !== entry.uncompressedSize) {
        throw new KilnError(
          KilnErrorCode.ArchiveUnsafe,
          `entry ${JSON.stringify(name)} holds ${written} bytes but the archive declares ${entry.uncompressedSize}`,
        );
      }
    }
    if (strayError !== undefined) throw strayError;
  } finally {
    zip.close();
  }
}

function openZip(archive: string): Promise<ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl().open(
      archive,
      { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: false },
      (error, zip) => (error ? reject(error) : resolve(zip)),
    );
  });
}

function nextEntry(zip: ZipFile): Promise<Entry | undefined> {
  return new Promise((resolve, reject) => {
    const settle = (finish: () => void) => {
      zip.off('entry', onEntry);
      zip.off('end', onEnd);
      zip.off('error', onError);
      finish();
    };
    const onEntry = (entry: Entry) => settle(() => resolve(entry));
    const onEnd = () => settle(() => resolve(undefined));
    const onError = (error: unknown) => settle(() => reject(error));
    zip.on('entry', onEntry);
    zip.on('end', onEnd);
    zip.on('error', onError);
    zip.readEntry();
  });
}

function openEntry(zip: ZipFile, entry: Entry): Promise<Readable> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (error, stream) => (error ? reject(error) : resolve(stream)));
  });
}

/** Folders and regular files pass; links, devices, fifos and sockets are refused. */
function zipEntryIsFolder(entry: Entry, name: string): boolean {
  const type = (entry.externalFileAttributes >>> 16) & S_IFMT;
  if (type === S_IFLNK) {
    throw new KilnError(KilnErrorCode.ArchiveUnsafe, `entry ${JSON.stringify(name)} is a link`);
  }
  if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) {
    throw new KilnError(
      KilnErrorCode.ArchiveUnsafe,
      `entry ${JSON.stringify(name)} is neither a file nor a folder`,
    );
  }
  return type === S_IFDIR || name.endsWith('/') || name.endsWith('\\');
}

function checkReadable(entry: Entry, name: string): void {
  if (entry.isEncrypted()) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `entry ${JSON.stringify(name)} is encrypted`,
    );
  }
  // 0 = stored, 8 = deflated: what yauzl can read.
  if (entry.compressionMethod !== 0 && entry.compressionMethod !== 8) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `entry ${JSON.stringify(name)} uses compression method ${entry.compressionMethod}`,
    );
  }
}
