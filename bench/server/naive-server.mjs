// The server a Node user would write by hand from onnxruntime-node's README: Koa, one session
// created at start, `session.run` inline in the handler, npy in and npy out. Plain JavaScript,
// run as its own process by bench/server: `node naive-server.mjs <model.onnx> <port>`.
import Koa from 'koa';
import ort from 'onnxruntime-node';
import { readNpy, writeNpy } from './naive-npy.mjs';

const [modelPath, port] = process.argv.slice(2);
const session = await ort.InferenceSession.create(modelPath);

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
