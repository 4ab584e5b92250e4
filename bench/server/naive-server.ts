// What a user would write by hand: Koa, one onnxruntime-node session, session.run in the
// request handler. Started as a child process by run.ts: `naive-server.ts <model.onnx> <port>`.
import Koa from 'koa';
import ort from 'onnxruntime-node';

const [modelPath, port] = process.argv.slice(2);
const session = await ort.InferenceSession.create(modelPath!, { graphOptimizationLevel: 'all' });
const inputName = session.inputNames[0]!;
const dims = JSON.parse(process.env.NAIVE_INPUT_DIMS ?? '[1,3,224,224]') as number[];

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.path === '/ping') {
    ctx.body = { status: 'Healthy' };
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  const data = new Float32Array(
    body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength),
  );
  const results = await session.run({ [inputName]: new ort.Tensor('float32', data, dims) });
  const output = results[session.outputNames[0]!]!;
  ctx.body = { shape: output.dims, data: Array.from(output.data as Float32Array) };
});
app.listen(Number(port), '127.0.0.1', () => process.send?.('ready'));
