import type * as Fflate from 'fflate';
import type { Zippable } from 'fflate';
import { lazyModule } from '../lazy-module.js';
import { NDList } from '../tensor/ndlist.js';
import { entryNames } from './entry-names.js';
import { DEFAULT_MAX_DECODED_BYTES } from './limits.js';
import { decodeNpy, encodeNpy, npyShape } from './npy.js';
import { readZipEntries } from './zip-reader.js';

const fflate = lazyModule<typeof Fflate>('fflate');

export interface NpzEncodeOptions {
  /** Deflate the entries (`numpy.savez_compressed`) instead of storing them (`numpy.savez`). */
  compress?: boolean;
}

export interface NpzDecodeOptions {
  /** Most bytes the entries may inflate to, all together. Default 1 GiB. */
  maxBytes?: number;
}

// A fixed timestamp keeps the archive bytes a function of the tensors alone.
const ENTRY_TIME = new Date(1980, 0, 1);

/** Encodes tensors as an .npz archive: one `<name>.npy` entry per tensor, in list order. */
export function encodeNpz(list: NDList, options: NpzEncodeOptions = {}): Uint8Array {
  const names = entryNames(list, 'npz');
  const level = options.compress ? 6 : 0;
  const files: Zippable = Object.create(null) as Zippable;
  list.tensors.forEach((tensor, i) => {
    files[`${names[i]}.npy`] = [encodeNpy(tensor), { level, mtime: ENTRY_TIME }];
  });
  return fflate().zipSync(files);
}

/** Decodes an .npz archive; tensors keep the entry order and names (without `.npy`). */
export function decodeNpz(bytes: Uint8Array, options: NpzDecodeOptions = {}): NDList {
  const entries = readZipEntries(bytes, options.maxBytes ?? DEFAULT_MAX_DECODED_BYTES);
  return new NDList(
    entries.map(({ name, data }) =>
      decodeNpy(data, name.endsWith('.npy') ? name.slice(0, -4) : name),
    ),
  );
}

const LOCAL_HEADER = 0x04034b50;

/** Entries npzShape looks through at most: a queue's key must cost its thread little. */
const NPZ_SHAPE_ENTRIES = 64;

/**
 * The shape of one entry of a stored .npz archive (`numpy.savez`; the entry `<name>.npy`,
 * else the first), read from the zip's local headers and the .npy header alone, cheap enough
 * for a queue to bucket requests by. Undefined for compressed or malformed archives. Looks
 * through the first 64 entries; `readShape` reads an entry's .npy header (a caller may bound
 * what it parses).
 */
export function npzShape(
  bytes: Uint8Array,
  name?: string,
  readShape: (npy: Uint8Array) => number[] | undefined = npyShape,
): number[] | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let first: number[] | undefined;
  let offset = 0;
  for (
    let entries = 0;
    entries < NPZ_SHAPE_ENTRIES &&
    offset + 30 <= bytes.length &&
    view.getUint32(offset, true) === LOCAL_HEADER;
    entries++
  ) {
    const flags = view.getUint16(offset + 6, true);
    const method = view.getUint16(offset + 8, true);
    const size = view.getUint32(offset + 18, true);
    const nameEnd = offset + 30 + view.getUint16(offset + 26, true);
    const start = nameEnd + view.getUint16(offset + 28, true);
    // Deflated entries, and sizes written after the data (flag bit 3), are not read here.
    if (method !== 0 || (flags & 8) !== 0 || start + size > bytes.length) break;
    const shape = readShape(bytes.subarray(start, start + size));
    if (name === undefined) return shape;
    if (String.fromCharCode(...bytes.subarray(offset + 30, nameEnd)) === `${name}.npy`)
      return shape;
    first ??= shape;
    offset = start + size;
  }
  return first;
}
