import { KilnError, KilnErrorCode } from '../errors.js';
import {
  DTYPES,
  type DType,
  type DTypeStorage,
  type NumericDType,
  allocate,
  bytesPerElement,
  dtypeNames,
  isNumericDType,
} from '../tensor/dtype.js';
import type { Shape } from '../tensor/shape.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { ByteReader } from './byte-reader.js';
import { checkedShape, malformed, unsupportedDType } from './limits.js';
import { type PyLiteral, parsePyLiteral } from './python-literal.js';
import { tensorFromRaw } from './raw-data.js';

const FORMAT = 'npy';

/** `\x93NUMPY`, the first six bytes of every .npy file. */
export const NPY_MAGIC = Uint8Array.of(0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59);

/** numpy aligns the data to this many bytes, so that it can be memory-mapped. */
const ARRAY_ALIGN = 64;
/** numpy leaves room after the header to rewrite the growing axis in place. */
const GROWTH_AXIS_MAX_DIGITS = 21;
/** The header is a small Python dict; anything near this size is not a real header. */
const MAX_HEADER_BYTES = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

type ElementType =
  | { kind: 'numeric'; dtype: NumericDType; littleEndian: boolean }
  | { kind: 'unicode'; chars: number; littleEndian: boolean }
  | { kind: 'bytes'; width: number };

/** Encodes one tensor as a version 1.0 .npy file (2.0 if the header needs it), as numpy does. */
export function encodeNpy(tensor: AnyTensor): Uint8Array {
  const { descr, data } = npyData(tensor);
  const header = cachedHeader(descr, tensor.shape);
  const out = new Uint8Array(header.byteLength + data.byteLength);
  out.set(header);
  out.set(data, header.byteLength);
  return out;
}

function npyData(tensor: AnyTensor): { descr: string; data: Uint8Array } {
  if (tensor.dtype === 'string') return unicodeData(tensor.data as string[]);
  const code = dtypeNames(tensor.dtype).numpy;
  if (code === undefined) throw unsupportedDType(FORMAT, `numpy has no ${tensor.dtype} type`);
  const order = bytesPerElement(tensor.dtype) === 1 ? '|' : '<';
  return { descr: `${order}${code}`, data: tensor.bytes() };
}

/** Fixed-width UTF-32: numpy's `<U` stores every element in as many code points as the longest. */
function unicodeData(strings: readonly string[]): { descr: string; data: Uint8Array } {
  const codePoints = strings.map((text) => Array.from(text, (char) => char.codePointAt(0)!));
  let chars = 1;
  for (const points of codePoints) chars = Math.max(chars, points.length);
  const words = new Uint32Array(strings.length * chars);
  codePoints.forEach((points, i) => words.set(points, i * chars));
  return { descr: `<U${chars}`, data: new Uint8Array(words.buffer) };
}

/**
 * Headers of the last few (dtype, shape) pairs encoded: a server answers the same shape over
 * and over, and writing the header text byte by byte cost a tenth of encoding a small answer.
 * Bounded, so that shapes a client chooses cannot grow it.
 */
const recentHeaders = new Map<string, Uint8Array>();
const RECENT_HEADERS = 32;

function cachedHeader(descr: string, shape: Shape): Uint8Array {
  const key = `${descr} ${shape.join(',')}`;
  let header = recentHeaders.get(key);
  if (header === undefined) {
    header = npyHeader(descr, shape);
    if (recentHeaders.size >= RECENT_HEADERS) recentHeaders.clear();
    recentHeaders.set(key, header);
  }
  return header;
}

function npyHeader(descr: string, shape: Shape): Uint8Array {
  const shapeRepr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeRepr}, }`;
  if (shape.length > 0) dict += ' '.repeat(GROWTH_AXIS_MAX_DIGITS - String(shape[0]).length);
  // Version 1.0 keeps the header length in 2 bytes; 2.0, otherwise the same, in 4.
  const layout = (lengthBytes: 2 | 4) => {
    const prefix = NPY_MAGIC.length + 2 + lengthBytes;
    const padding = ARRAY_ALIGN - ((prefix + dict.length + 1) % ARRAY_ALIGN);
    return { lengthBytes, prefix, padding, headerLength: dict.length + padding + 1 };
  };
  let { lengthBytes, prefix, padding, headerLength } = layout(2);
  if (headerLength > 0xffff) ({ lengthBytes, prefix, padding, headerLength } = layout(4));
  const out = new Uint8Array(prefix + headerLength);
  const view = new DataView(out.buffer);
  out.set(NPY_MAGIC);
  out[6] = lengthBytes === 2 ? 1 : 2;
  if (lengthBytes === 2) view.setUint16(8, headerLength, true);
  else view.setUint32(8, headerLength, true);
  const text = dict + ' '.repeat(padding) + '\n';
  for (let i = 0; i < text.length; i++) out[prefix + i] = text.charCodeAt(i);
  return out;
}

/** Decodes a .npy file (format versions 1.0, 2.0 and 3.0). */
export function decodeNpy(bytes: Uint8Array, name?: string): AnyTensor {
  const reader = new ByteReader(bytes, FORMAT);
  const header = readHeader(reader);
  const { shape, size } = checkedShape(header.shape, FORMAT);
  const raw = bytes.subarray(reader.offset);
  const tensor = decodeElements(header.type, raw, shape, size, name);
  return header.fortranOrder ? fortranToC(tensor) : tensor;
}

/**
 * The shape a .npy file declares, read from its header alone (cheap enough for a queue to
 * bucket requests by); undefined when the bytes are no valid .npy header.
 */
export function npyShape(bytes: Uint8Array): number[] | undefined {
  return npyLayout(bytes)?.shape;
}

/**
 * The dtype and shape a .npy file declares, from its header alone: what the decoded tensor
 * will be (text arrays decode to `string`); undefined when the bytes are no valid .npy header.
 */
export function npyLayout(bytes: Uint8Array): { dtype: DType; shape: number[] } | undefined {
  if (!NPY_MAGIC.every((byte, i) => bytes[i] === byte)) return undefined;
  try {
    const header = readHeader(new ByteReader(bytes, FORMAT));
    const shape = checkedShape(header.shape, FORMAT).shape.slice();
    return { dtype: header.type.kind === 'numeric' ? header.type.dtype : 'string', shape };
  } catch {
    return undefined;
  }
}

function readHeader(reader: ByteReader): NpyHeader {
  const magic = reader.take(NPY_MAGIC.length, 'magic');
  if (!magic.every((byte, i) => byte === NPY_MAGIC[i])) {
    throw malformed(FORMAT, 'data does not start with \\x93NUMPY');
  }
  const major = reader.u8('version');
  const minor = reader.u8('version');
  if (major < 1 || major > 3 || minor !== 0) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `npy: format version ${major}.${minor} is not supported`,
    );
  }
  const headerLength =
    major === 1 ? reader.u16('header length', true) : reader.u32('header length', true);
  if (headerLength > MAX_HEADER_BYTES) {
    throw malformed(FORMAT, `header of ${headerLength} bytes is too long`);
  }
  const headerBytes = reader.take(headerLength, 'header');
  // The request before sent the same header, most of the time: compared byte for byte, it needs
  // no text made of it at all.
  const last = lastHeader;
  if (last && last.major === major && sameBytes(last.bytes, headerBytes)) return last.header;
  const header = parseHeader(major === 3 ? decodeUtf8(headerBytes) : latin1(headerBytes));
  // A copy: a Buffer's slice() would be a view of the request, which moves on or changes.
  lastHeader = { major, bytes: Uint8Array.from(headerBytes), header };
  return header;
}

let lastHeader: { major: number; bytes: Uint8Array; header: NpyHeader } | undefined;

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function latin1(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i += 4096) {
    // apply takes the typed array as it is; spreading it would iterate it element by element.
    const piece = bytes.subarray(i, i + 4096) as unknown as number[];
    text += String.fromCharCode.apply(null, piece);
  }
  return text;
}

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw malformed(FORMAT, 'text is not valid UTF-8');
  }
}

interface NpyHeader {
  readonly type: ElementType;
  readonly fortranOrder: boolean;
  readonly shape: readonly unknown[];
}

// Clients send the same few headers over and over (one shape per model input), and parsing a
// Python literal costs more than copying a small tensor: parsed headers are kept, a bounded few.
const parsedHeaders = new Map<string, NpyHeader>();
const PARSED_HEADERS_KEPT = 64;

function parseHeader(text: string): NpyHeader {
  const known = parsedHeaders.get(text);
  if (known) return known;
  const header = parseHeaderText(text);
  if (parsedHeaders.size >= PARSED_HEADERS_KEPT) parsedHeaders.clear();
  parsedHeaders.set(text, header);
  return header;
}

function parseHeaderText(text: string): NpyHeader {
  const dict = parsePyLiteral(text);
  if (dict === null || typeof dict !== 'object' || dict.kind !== 'dict') {
    throw malformed(FORMAT, 'header is not a dictionary');
  }
  const keys = [...dict.entries.keys()].sort().join(',');
  if (keys !== 'descr,fortran_order,shape') {
    throw malformed(FORMAT, `header must have exactly descr, fortran_order and shape, not ${keys}`);
  }
  const descr = dict.entries.get('descr')!;
  const fortranOrder = dict.entries.get('fortran_order')!;
  const shape = dict.entries.get('shape')!;
  if (typeof fortranOrder !== 'boolean') throw malformed(FORMAT, 'fortran_order is not a boolean');
  if (!isSequence(shape, 'tuple')) throw malformed(FORMAT, 'shape is not a tuple');
  if (typeof descr !== 'string') {
    throw unsupportedDType(FORMAT, 'structured (record) arrays are not supported');
  }
  return { type: elementType(descr), fortranOrder, shape: shape.items };
}

function isSequence(
  value: PyLiteral,
  kind: 'tuple' | 'list',
): value is { kind: typeof kind; items: PyLiteral[] } {
  return value !== null && typeof value === 'object' && value.kind === kind;
}

/** numpy type codes (`f4`) of the dtypes numpy has, bfloat16 and strings aside. */
const NUMERIC_CODES = new Map<string, NumericDType>(
  DTYPES.filter(isNumericDType).flatMap((dtype) => {
    const code = dtypeNames(dtype).numpy;
    return code === undefined ? [] : [[code, dtype] as const];
  }),
);

function elementType(descr: string): ElementType {
  const match = /^([<>|=])([a-zA-Z])(\d{1,9})$/.exec(descr);
  if (!match) throw unsupportedDType(FORMAT, `unsupported dtype ${JSON.stringify(descr)}`);
  const [, order, kind, digits] = match as unknown as [string, string, string, string];
  // '|' (byte order irrelevant) and '=' (native) both mean the writer's own order: little-endian
  // on every platform numpy ships for today.
  const littleEndian = order !== '>';
  const width = Number(digits);
  if (kind === 'U' || kind === 'S') {
    if (width === 0) throw malformed(FORMAT, `zero-width dtype ${descr}`);
    return kind === 'U'
      ? { kind: 'unicode', chars: width, littleEndian }
      : { kind: 'bytes', width };
  }
  const dtype = NUMERIC_CODES.get(kind + digits);
  if (dtype === undefined) {
    throw unsupportedDType(FORMAT, `unsupported dtype ${JSON.stringify(descr)}`);
  }
  return { kind: 'numeric', dtype, littleEndian };
}

function decodeElements(
  type: ElementType,
  raw: Uint8Array,
  shape: Shape,
  size: number,
  name: string | undefined,
): AnyTensor {
  if (type.kind === 'numeric') {
    return tensorFromRaw(FORMAT, type.dtype, raw, shape, size, name, type.littleEndian);
  }
  const width = type.kind === 'unicode' ? type.chars * 4 : type.width;
  if (raw.byteLength !== size * width) {
    throw malformed(
      FORMAT,
      `shape [${shape.join(', ')}] needs ${size * width} data bytes, got ${raw.byteLength}`,
    );
  }
  const strings = new Array<string>(size);
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  for (let i = 0; i < size; i++) {
    strings[i] =
      type.kind === 'unicode'
        ? utf32Element(view, i * width, type.chars, type.littleEndian)
        : bytesElement(raw.subarray(i * width, (i + 1) * width));
  }
  return new Tensor('string', strings, shape, name);
}

/** One `U` element: `chars` code points, trailing NULs being padding (as numpy reads them). */
function utf32Element(
  view: DataView,
  offset: number,
  chars: number,
  littleEndian: boolean,
): string {
  let length = chars;
  while (length > 0 && view.getUint32(offset + (length - 1) * 4, littleEndian) === 0) length--;
  const points = new Array<number>(length);
  for (let i = 0; i < length; i++) {
    const point = view.getUint32(offset + i * 4, littleEndian);
    if (point > 0x10ffff) throw malformed(FORMAT, `invalid code point ${point}`);
    points[i] = point;
  }
  let text = '';
  for (let i = 0; i < length; i += 4096) text += String.fromCodePoint(...points.slice(i, i + 4096));
  return text;
}

/** One `S` element: bytes up to the trailing NUL padding, read as UTF-8. */
function bytesElement(bytes: Uint8Array): string {
  let length = bytes.length;
  while (length > 0 && bytes[length - 1] === 0) length--;
  return decodeUtf8(bytes.subarray(0, length));
}

/** Reorders column-major (Fortran) data into the row-major order every Tensor uses. */
function fortranToC(tensor: AnyTensor): AnyTensor {
  const { shape } = tensor;
  if (shape.filter((dim) => dim > 1).length < 2) return tensor;
  const rank = shape.length;
  const strides = new Array<number>(rank);
  for (let k = 0, stride = 1; k < rank; k++) {
    strides[k] = stride;
    stride *= shape[k]!;
  }
  const source = tensor.data as ArrayLike<unknown>;
  const out = allocate(tensor.dtype, tensor.size);
  const target = out as unknown as unknown[];
  const index = new Array<number>(rank).fill(0);
  let from = 0;
  for (let to = 0; to < target.length; to++) {
    target[to] = source[from];
    for (let k = rank - 1; k >= 0; k--) {
      index[k]!++;
      from += strides[k]!;
      if (index[k]! < shape[k]!) break;
      from -= shape[k]! * strides[k]!;
      index[k] = 0;
    }
  }
  return new Tensor<DType>(tensor.dtype, out as DTypeStorage[DType], shape, tensor.name);
}
