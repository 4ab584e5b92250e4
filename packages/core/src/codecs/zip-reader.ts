import { crc32 } from 'node:zlib';
import type * as Fflate from 'fflate';
import { lazyModule } from '../lazy-module.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import { ByteReader } from './byte-reader.js';
import { malformed } from './limits.js';

const fflate = lazyModule<typeof Fflate>('fflate');

export interface ZipEntry {
  readonly name: string;
  readonly data: Uint8Array;
}

const FORMAT = 'npz';
const EOCD_SIGNATURE = 0x06054b50;
const EOCD_SIZE = 22;
const ZIP64_LOCATOR_SIGNATURE = 0x07064b50;
const ZIP64_EOCD_SIGNATURE = 0x06064b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const CENTRAL_SIZE = 46;
const LOCAL_SIGNATURE = 0x04034b50;
const LOCAL_SIZE = 30;
const ZIP64_EXTRA_ID = 0x0001;
const STORED = 0;
const DEFLATED = 8;
/**
 * Compressed bytes handed to the inflater at a time. Deflate expands at most ~1032×, so each
 * step can overshoot the size limit by at most ~17 MB before the check stops it.
 */
const INFLATE_STEP = 16 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const latin1 = new TextDecoder('latin1');

interface CentralEntry {
  name: string;
  method: number;
  crc: number;
  compressedSize: number;
  size: number;
  localOffset: number;
}

/**
 * Reads every entry of a zip archive, in central-directory order, never trusting a declared
 * size: the declared total must fit `maxBytes` before anything is inflated, and inflation stops
 * as soon as an entry produces more than it declared.
 */
export function readZipEntries(bytes: Uint8Array, maxBytes: number): ZipEntry[] {
  const directory = readCentralDirectory(bytes);
  const declared = directory.entries.reduce((sum, entry) => sum + entry.size, 0);
  if (declared > maxBytes) {
    throw new KilnError(
      KilnErrorCode.PayloadTooLarge,
      `npz: archive declares ${declared} bytes, more than the ${maxBytes} allowed`,
    );
  }
  const spans = directory.entries.map((entry) => ({ entry, ...dataSpan(bytes, entry) }));
  const sorted = [...spans].sort((a, b) => a.entry.localOffset - b.entry.localOffset);
  for (let i = 0; i < sorted.length; i++) {
    const next = sorted[i + 1]?.entry.localOffset ?? directory.offset;
    if (sorted[i]!.end > next) {
      throw malformed(FORMAT, `entry ${sorted[i]!.entry.name} overlaps the next record`);
    }
  }
  return spans.map(({ entry, start, end }) => ({
    name: entry.name,
    data: entryData(entry, bytes.subarray(start, end)),
  }));
}

function readCentralDirectory(bytes: Uint8Array): { offset: number; entries: CentralEntry[] } {
  const eocd = findEndRecord(bytes);
  const reader = new ByteReader(bytes, FORMAT);
  reader.offset = eocd + 4;
  const disk = reader.u16('end record', true);
  const directoryDisk = reader.u16('end record', true);
  reader.u16('end record', true);
  let count = reader.u16('end record', true);
  let size = reader.u32('end record', true);
  let offset = reader.u32('end record', true);
  if (disk !== 0 || directoryDisk !== 0) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      'npz: multi-disk archives are not supported',
    );
  }
  let directoryEnd = eocd;
  if (count === 0xffff || size === 0xffffffff || offset === 0xffffffff) {
    ({ count, size, offset, recordOffset: directoryEnd } = readZip64End(bytes, eocd));
  }
  if (offset + size > directoryEnd) {
    throw malformed(FORMAT, 'central directory lies outside the archive');
  }
  if (count > size / CENTRAL_SIZE) {
    throw malformed(FORMAT, `central directory too small for ${count} entries`);
  }
  reader.offset = offset;
  const entries: CentralEntry[] = [];
  for (let i = 0; i < count; i++) entries.push(readCentralEntry(reader));
  if (reader.offset > offset + size) {
    throw malformed(FORMAT, 'central directory overruns its declared size');
  }
  return { offset, entries };
}

function findEndRecord(bytes: Uint8Array): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const lowest = Math.max(0, bytes.byteLength - EOCD_SIZE - 0xffff);
  for (let at = bytes.byteLength - EOCD_SIZE; at >= lowest; at--) {
    // The comment length must reach exactly to the end, so a signature inside data is not taken.
    if (
      view.getUint32(at, true) === EOCD_SIGNATURE &&
      at + EOCD_SIZE + view.getUint16(at + 20, true) === bytes.byteLength
    ) {
      return at;
    }
  }
  throw malformed(
    FORMAT,
    'no zip end-of-central-directory record (truncated or not a zip archive)',
  );
}

function readZip64End(
  bytes: Uint8Array,
  eocd: number,
): { count: number; size: number; offset: number; recordOffset: number } {
  const reader = new ByteReader(bytes, FORMAT);
  if (eocd < 20) throw malformed(FORMAT, 'zip64 locator missing');
  reader.offset = eocd - 20;
  if (reader.u32('zip64 locator', true) !== ZIP64_LOCATOR_SIGNATURE) {
    throw malformed(FORMAT, 'zip64 locator missing');
  }
  reader.u32('zip64 locator', true);
  const recordOffset = reader.u64Safe('zip64 record offset', true);
  if (recordOffset > eocd - 20) {
    throw malformed(FORMAT, 'zip64 end record lies outside the archive');
  }
  reader.offset = recordOffset;
  if (reader.u32('zip64 end record', true) !== ZIP64_EOCD_SIGNATURE) {
    throw malformed(FORMAT, 'zip64 end record missing');
  }
  reader.take(8 + 2 + 2 + 4 + 4 + 8, 'zip64 end record');
  const count = reader.u64Safe('zip64 entry count', true);
  const size = reader.u64Safe('zip64 directory size', true);
  const offset = reader.u64Safe('zip64 directory offset', true);
  return { count, size, offset, recordOffset };
}

function readCentralEntry(reader: ByteReader): CentralEntry {
  if (reader.u32('central directory', true) !== CENTRAL_SIGNATURE) {
    throw malformed(FORMAT, `bad central directory record at offset ${reader.offset - 4}`);
  }
  reader.take(4, 'central directory');
  const flags = reader.u16('central directory', true);
  const method = reader.u16('central directory', true);
  reader.take(4, 'central directory');
  const crc = reader.u32('central directory', true);
  let compressedSize = reader.u32('central directory', true);
  let size = reader.u32('central directory', true);
  const nameLength = reader.u16('central directory', true);
  const extraLength = reader.u16('central directory', true);
  const commentLength = reader.u16('central directory', true);
  reader.take(8, 'central directory');
  let localOffset = reader.u32('central directory', true);
  const nameBytes = reader.take(nameLength, 'entry name');
  const extra = new ByteReader(reader.take(extraLength, 'extra field'), FORMAT);
  reader.take(commentLength, 'entry comment');
  const name = decodeName(nameBytes);
  // A zip64 extra field carries, in this order, whichever of the three fields overflowed.
  while (extra.remaining >= 4) {
    const id = extra.u16('extra field', true);
    const field = new ByteReader(extra.take(extra.u16('extra field', true), 'extra field'), FORMAT);
    if (id !== ZIP64_EXTRA_ID) continue;
    if (size === 0xffffffff) size = field.u64Safe('zip64 size', true);
    if (compressedSize === 0xffffffff) compressedSize = field.u64Safe('zip64 size', true);
    if (localOffset === 0xffffffff) localOffset = field.u64Safe('zip64 offset', true);
  }
  if (flags & 1) {
    throw new KilnError(KilnErrorCode.UnsupportedFormat, `npz: entry ${name} is encrypted`);
  }
  if (method !== STORED && method !== DEFLATED) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `npz: entry ${name} uses compression method ${method}`,
    );
  }
  if (method === STORED && compressedSize !== size) {
    throw malformed(FORMAT, `stored entry ${name} has two sizes`);
  }
  return { name, method, crc, compressedSize, size, localOffset };
}

/** Names are UTF-8 when flagged; many writers use UTF-8 without the flag, so try it first. */
function decodeName(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    return latin1.decode(bytes);
  }
}

function dataSpan(bytes: Uint8Array, entry: CentralEntry): { start: number; end: number } {
  const reader = new ByteReader(bytes, FORMAT);
  if (entry.localOffset > bytes.byteLength) {
    throw malformed(FORMAT, `entry ${entry.name} lies outside the archive`);
  }
  reader.offset = entry.localOffset;
  if (reader.u32('local header', true) !== LOCAL_SIGNATURE) {
    throw malformed(FORMAT, `bad local header for ${entry.name}`);
  }
  reader.take(LOCAL_SIZE - 8, 'local header');
  const nameLength = reader.u16('local header', true);
  const extraLength = reader.u16('local header', true);
  reader.take(nameLength + extraLength, 'local header');
  reader.need(entry.compressedSize, `data of ${entry.name}`);
  return { start: reader.offset, end: reader.offset + entry.compressedSize };
}

function entryData(entry: CentralEntry, compressed: Uint8Array): Uint8Array {
  const data = entry.method === STORED ? compressed : inflateBounded(entry, compressed);
  if (data.byteLength !== entry.size) {
    throw malformed(
      FORMAT,
      `entry ${entry.name} holds ${data.byteLength} bytes, declared ${entry.size}`,
    );
  }
  if (crc32(data) !== entry.crc) throw malformed(FORMAT, `entry ${entry.name} fails its CRC check`);
  return data;
}

class OverDeclared extends Error {}

function inflateBounded(entry: CentralEntry, compressed: Uint8Array): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const inflater = new (fflate().Inflate)((chunk) => {
    total += chunk.byteLength;
    if (total > entry.size) throw new OverDeclared();
    chunks.push(chunk);
  });
  try {
    let at = 0;
    do {
      const end = Math.min(at + INFLATE_STEP, compressed.byteLength);
      inflater.push(compressed.subarray(at, end), end === compressed.byteLength);
      at = end;
    } while (at < compressed.byteLength);
  } catch (error) {
    if (error instanceof OverDeclared) {
      throw malformed(
        FORMAT,
        `entry ${entry.name} inflates to more than its declared ${entry.size} bytes`,
      );
    }
    throw malformed(
      FORMAT,
      `entry ${entry.name} is not valid deflate data (${error instanceof Error ? error.message : String(error)})`,
    );
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
