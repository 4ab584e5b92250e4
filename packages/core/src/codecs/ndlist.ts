import { KilnError, KilnErrorCode } from '../errors.js';
import { type DType, bytesPerElement, dtypeNames, fromDjlDType } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import { type AnyTensor, Tensor } from '../tensor/tensor.js';
import { ByteReader } from './byte-reader.js';
import { ByteWriter } from './byte-writer.js';
import { readJavaUtf, writeJavaUtf } from './java-utf.js';
import { checkedShape, malformed } from './limits.js';
import { tensorFromRaw } from './raw-data.js';

// DJL's NDList encoding (`NDList.encode()`), written as Java's DataOutputStream does: big-endian
// framing, strings as 2-byte length + modified UTF-8. Every array carries its data's own byte
// order; Kiln writes little-endian data, version 3.

const FORMAT = 'ndlist';
const MAGIC = 'NDAR';
const VERSION = 3;
const DENSE = 'DENSE';
/** The `littleEndian` flag for Java's framing, which is always big-endian. */
const JAVA_LITTLE_ENDIAN = false;
/** The fewest bytes one array can take, so a lying count is caught before the loop. */
const MIN_ARRAY_BYTES = 26;

export function encodeNDList(list: NDList): Uint8Array {
  const writer = new ByteWriter();
  writer.i32(list.length, JAVA_LITTLE_ENDIAN);
  for (const tensor of list) writeArray(writer, tensor);
  return writer.finish();
}

function writeArray(writer: ByteWriter, tensor: AnyTensor): void {
  writeJavaUtf(writer, MAGIC, FORMAT);
  writer.i32(VERSION, JAVA_LITTLE_ENDIAN);
  if (tensor.name === undefined) {
    writer.u8(0);
  } else {
    writer.u8(1);
    writeJavaUtf(writer, tensor.name, FORMAT);
  }
  writeJavaUtf(writer, DENSE, FORMAT);
  writeJavaUtf(writer, dtypeNames(tensor.dtype).djl, FORMAT);
  writer.i32(tensor.shape.length, JAVA_LITTLE_ENDIAN);
  for (const dim of tensor.shape) writer.i64(BigInt(dim), JAVA_LITTLE_ENDIAN);
  writer.i32(0, JAVA_LITTLE_ENDIAN);
  if (tensor.dtype === 'string') {
    const strings = tensor.data as string[];
    writer.i32(strings.length, JAVA_LITTLE_ENDIAN);
    for (const text of strings) writeJavaUtf(writer, text, FORMAT);
    return;
  }
  const bytes = tensor.bytes();
  if (bytes.byteLength > 0x7fffffff) {
    throw new KilnError(KilnErrorCode.InvalidInput, `${FORMAT}: ${tensor} is larger than 2 GiB`);
  }
  writer.u8(0x3c);
  writer.i32(bytes.byteLength, JAVA_LITTLE_ENDIAN);
  writer.bytes(bytes);
}

export function decodeNDList(bytes: Uint8Array): NDList {
  const reader = new ByteReader(bytes, FORMAT);
  const count = reader.i32('array count', JAVA_LITTLE_ENDIAN);
  if (count < 0 || count > reader.remaining / MIN_ARRAY_BYTES) {
    throw malformed(FORMAT, `array count ${count} does not fit in ${bytes.byteLength} bytes`);
  }
  const tensors: AnyTensor[] = [];
  for (let i = 0; i < count; i++) tensors.push(readArray(reader));
  if (reader.remaining !== 0) {
    throw malformed(FORMAT, `${reader.remaining} bytes follow the last array`);
  }
  return new NDList(tensors);
}

function readArray(reader: ByteReader): AnyTensor {
  if (readJavaUtf(reader, 'magic', FORMAT) !== MAGIC) {
    throw malformed(FORMAT, 'array does not start with NDAR');
  }
  const version = reader.i32('version', JAVA_LITTLE_ENDIAN);
  if (version < 1 || version > VERSION) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `${FORMAT}: array encoding version ${version} is not supported`,
    );
  }
  let name: string | undefined;
  if (version >= 2) {
    const hasName = reader.u8('name flag');
    if (hasName > 1) throw malformed(FORMAT, `name flag ${hasName} is neither 0 nor 1`);
    if (hasName === 1) name = readJavaUtf(reader, 'name', FORMAT);
  }
  // DJL's Java writer puts DENSE here and its Python writer `default`; both readers ignore it.
  readJavaUtf(reader, 'sparse format', FORMAT);
  const dtype: DType = fromDjlDType(readJavaUtf(reader, 'data type', FORMAT));
  const { shape, size } = readShape(reader);
  if (dtype === 'string') return readStrings(reader, shape, size, name);
  // Before version 3 DJL wrote the data in its native order, little-endian on every platform it runs on.
  let littleEndian = true;
  if (version >= 3) {
    const order = reader.u8('byte order');
    if (order !== 0x3c && order !== 0x3e) {
      throw malformed(FORMAT, `byte order mark ${order} is neither < nor >`);
    }
    littleEndian = order === 0x3c;
  }
  const length = reader.i32('data length', JAVA_LITTLE_ENDIAN);
  if (length !== size * bytesPerElement(dtype)) {
    throw malformed(
      FORMAT,
      `${dtype}[${shape.join(', ')}] needs ${size * bytesPerElement(dtype)} bytes, header says ${length}`,
    );
  }
  return tensorFromRaw(FORMAT, dtype, reader.take(length, 'data'), shape, size, name, littleEndian);
}

/** DJL's `Shape.encode`: dimensions as int64, then a layout of one UTF-16 unit per dimension. */
function readShape(reader: ByteReader): { shape: number[]; size: number } {
  const rank = reader.i32('rank', JAVA_LITTLE_ENDIAN);
  if (rank < 0 || rank * 8 > reader.remaining) {
    throw malformed(FORMAT, `rank ${rank} does not fit the data`);
  }
  const dims: number[] = [];
  for (let i = 0; i < rank; i++) {
    const dim = reader.i64('dimension', JAVA_LITTLE_ENDIAN);
    if (dim < 0n || dim > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw malformed(FORMAT, `invalid dimension ${dim}`);
    }
    dims.push(Number(dim));
  }
  const checked = checkedShape(dims, FORMAT);
  const layoutLength = reader.i32('layout length', JAVA_LITTLE_ENDIAN);
  if (layoutLength < 0) throw malformed(FORMAT, `negative layout length ${layoutLength}`);
  // The layout (e.g. NCHW) has no place in a Kiln tensor; it is read and dropped.
  reader.take(layoutLength * 2, 'layout');
  return { shape: checked.shape as number[], size: checked.size };
}

function readStrings(
  reader: ByteReader,
  shape: number[],
  size: number,
  name: string | undefined,
): AnyTensor {
  const count = reader.i32('string count', JAVA_LITTLE_ENDIAN);
  if (count !== size) {
    throw malformed(
      FORMAT,
      `shape [${shape.join(', ')}] needs ${size} strings, header says ${count}`,
    );
  }
  if (count * 2 > reader.remaining) throw malformed(FORMAT, `${count} strings do not fit the data`);
  const strings = new Array<string>(count);
  for (let i = 0; i < count; i++) strings[i] = readJavaUtf(reader, 'string', FORMAT);
  return new Tensor('string', strings, shape, name);
}
