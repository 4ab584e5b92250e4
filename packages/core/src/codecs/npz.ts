import type * as Fflate from 'fflate';
import type { Zippable } from 'fflate';
import { lazyModule } from '../lazy-module.js';
import { NDList } from '../tensor/ndlist.js';
import { entryNames } from './entry-names.js';
import { DEFAULT_MAX_DECODED_BYTES } from './limits.js';
import { decodeNpy, encodeNpy } from './npy.js';
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
