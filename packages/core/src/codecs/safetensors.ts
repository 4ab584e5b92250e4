import { KilnError, KilnErrorCode } from '../errors.js';
import {
  type NumericDType,
  bytesPerElement,
  dtypeNames,
  fromSafetensorsDType,
} from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import type { AnyTensor } from '../tensor/tensor.js';
import { ByteReader } from './byte-reader.js';
import { entryNames } from './entry-names.js';
import { checkedShape, malformed, unsupportedDType } from './limits.js';
import { tensorFromRaw } from './raw-data.js';

const FORMAT = 'safetensors';
/** The reference implementation refuses headers above 100 MB. */
export const MAX_SAFETENSORS_HEADER_BYTES = 100_000_000;
const METADATA_KEY = '__metadata__';
/** The data starts on an 8-byte boundary, as the reference writer pads it. */
const HEADER_ALIGN = 8;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

export interface SafetensorsEncodeOptions {
  /** Free-form string pairs stored under `__metadata__`. */
  metadata?: Readonly<Record<string, string>>;
}

export interface SafetensorsFile {
  readonly tensors: NDList;
  readonly metadata: Readonly<Record<string, string>>;
}

/** Encodes tensors in list order; unnamed ones are called `arr_0`, `arr_1`… */
export function encodeSafetensors(
  list: NDList,
  options: SafetensorsEncodeOptions = {},
): Uint8Array {
  const names = entryNames(list, FORMAT);
  // The header is written by hand so that entries keep list order even for names like "0",
  // which a JS object would move to the front.
  const entries: string[] = [];
  if (options.metadata) {
    entries.push(`${JSON.stringify(METADATA_KEY)}:${JSON.stringify(options.metadata)}`);
  }
  let offset = 0;
  list.tensors.forEach((tensor, i) => {
    if (tensor.dtype === 'string') {
      throw unsupportedDType(FORMAT, 'string tensors cannot be stored');
    }
    if (names[i] === METADATA_KEY) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `${FORMAT}: ${METADATA_KEY} is not a tensor name`,
      );
    }
    const end = offset + tensor.bytes().byteLength;
    const info = {
      dtype: dtypeNames(tensor.dtype).safetensors,
      shape: tensor.shape,
      data_offsets: [offset, end],
    };
    entries.push(`${JSON.stringify(names[i])}:${JSON.stringify(info)}`);
    offset = end;
  });
  const json = encoder.encode(`{${entries.join(',')}}`);
  const headerLength = Math.ceil(json.byteLength / HEADER_ALIGN) * HEADER_ALIGN;
  const out = new Uint8Array(8 + headerLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.byteLength, 8 + headerLength);
  let at = 8 + headerLength;
  for (const tensor of list.tensors) {
    const bytes = tensor.bytes();
    out.set(bytes, at);
    at += bytes.byteLength;
  }
  return out;
}

export function decodeSafetensors(bytes: Uint8Array): NDList {
  return decodeSafetensorsFile(bytes).tensors;
}

interface Entry {
  name: string;
  dtype: NumericDType;
  shape: readonly number[];
  size: number;
  begin: number;
  end: number;
}

/**
 * Decodes a safetensors file, tensors in data order. Like the reference implementation it
 * insists that the entries tile the data exactly: no gaps, no overlaps, nothing left over.
 */
export function decodeSafetensorsFile(bytes: Uint8Array): SafetensorsFile {
  const reader = new ByteReader(bytes, FORMAT);
  const headerLength = reader.u64Safe('header length', true);
  if (headerLength > MAX_SAFETENSORS_HEADER_BYTES) {
    throw malformed(
      FORMAT,
      `header of ${headerLength} bytes is larger than ${MAX_SAFETENSORS_HEADER_BYTES}`,
    );
  }
  const header = parseHeader(reader.take(headerLength, 'header'));
  const data = bytes.subarray(reader.offset);
  let metadata: Record<string, string> = {};
  const entries: Entry[] = [];
  for (const [name, value] of Object.entries(header)) {
    if (name === METADATA_KEY) metadata = parseMetadata(value);
    else entries.push(parseEntry(name, value));
  }
  entries.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let expected = 0;
  for (const entry of entries) {
    if (entry.begin !== expected) {
      throw malformed(
        FORMAT,
        `tensor ${entry.name} starts at ${entry.begin}, expected ${expected} (gap or overlap)`,
      );
    }
    expected = entry.end;
  }
  if (expected !== data.byteLength) {
    throw malformed(
      FORMAT,
      `tensors cover ${expected} data bytes but the file holds ${data.byteLength}`,
    );
  }
  const tensors: AnyTensor[] = entries.map((entry) =>
    tensorFromRaw(
      FORMAT,
      entry.dtype,
      data.subarray(entry.begin, entry.end),
      entry.shape,
      entry.size,
      entry.name,
    ),
  );
  return { tensors: new NDList(tensors), metadata };
}

function parseHeader(bytes: Uint8Array): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch {
    throw malformed(FORMAT, 'header is not valid UTF-8 JSON');
  }
  if (!isObject(value)) throw malformed(FORMAT, 'header is not a JSON object');
  return value;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseMetadata(value: unknown): Record<string, string> {
  if (!isObject(value) || !Object.values(value).every((item) => typeof item === 'string')) {
    throw malformed(FORMAT, `${METADATA_KEY} must map strings to strings`);
  }
  return value as Record<string, string>;
}

function parseEntry(name: string, value: unknown): Entry {
  if (!isObject(value)) throw malformed(FORMAT, `entry ${name} is not an object`);
  const { dtype: dtypeName, shape: dims, data_offsets: offsets } = value;
  if (typeof dtypeName !== 'string' || dtypeName === '') {
    throw malformed(FORMAT, `entry ${name} has no dtype`);
  }
  const dtype = fromSafetensorsDType(dtypeName);
  if (dtype === 'string') throw unsupportedDType(FORMAT, `unsupported dtype ${dtypeName}`);
  if (!Array.isArray(dims)) throw malformed(FORMAT, `entry ${name} has no shape`);
  const { shape, size } = checkedShape(dims, FORMAT);
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    !offsets.every((offset) => Number.isSafeInteger(offset) && offset >= 0) ||
    offsets[0] > offsets[1]
  ) {
    throw malformed(FORMAT, `entry ${name} has invalid data_offsets`);
  }
  const [begin, end] = offsets as [number, number];
  if (end - begin !== size * bytesPerElement(dtype)) {
    throw malformed(
      FORMAT,
      `entry ${name} spans ${end - begin} bytes but ${dtypeName}[${shape.join(', ')}] needs ${size * bytesPerElement(dtype)}`,
    );
  }
  return { name, dtype, shape, size, begin, end };
}
