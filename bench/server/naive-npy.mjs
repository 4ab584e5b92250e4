// The naive server's npy codec, written the obvious way (its own module so that bench/codecs
// can time it against Kiln's).
import ort from 'onnxruntime-node';

// npy: magic, version, little-endian header length, a Python-dict header, then the data.
export function readNpy(body) {
  const headerLength = body.readUInt16LE(8);
  const header = body.toString('latin1', 10, 10 + headerLength);
  const shape = header
    .match(/'shape': \(([^)]*)\)/)[1]
    .split(',')
    .filter((s) => s.trim())
    .map(Number);
  const start = 10 + headerLength;
  const data = new Float32Array(
    body.buffer.slice(body.byteOffset + start, body.byteOffset + body.byteLength),
  );
  return new ort.Tensor('float32', data, shape);
}

export function writeNpy(tensor) {
  const dims = tensor.dims.length === 1 ? `${tensor.dims[0]},` : tensor.dims.join(', ');
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const prefix = Buffer.alloc(10);
  prefix.write('\x93NUMPY', 0, 'latin1');
  prefix.writeUInt8(1, 6);
  prefix.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  return Buffer.concat([
    prefix,
    Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength),
  ]);
}
