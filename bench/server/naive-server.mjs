// The server a Node user would write by hand from onnxruntime-node's README: Koa, one session
// created at start, `session.run` inline in the handler, npy in and npy out. Plain JavaScript,
// run as its own process by bench/server: `node naive-server.mjs <model.onnx> <port>`.
import Koa from 'koa';
import ort from 'onnxruntime-node';

const [modelPath, port] = process.argv.slice(2);
const session = await ort.InferenceSession.create(modelPath);

// npy: magic, version, little-endian header length, a Python-dict header, then the data.
function readNpy(body) {
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

function writeNpy(tensor) {
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

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.path === '/ping') {
    ctx.body = { status: 'Healthy' };
    return;
  }
  const chunks = [];
  for await (const chunk of ctx.req) chunks.push(chunk);
  const input = readNpy(Buffer.concat(chunks));
  const results = await session.run({ [session.inputNames[0]]: input });
  ctx.type = 'tensor/npy';
  ctx.body = writeNpy(results[session.outputNames[0]]);
});
app.listen(Number(port), '127.0.0.1', () => process.send?.('ready'));
