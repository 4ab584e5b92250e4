// Kiln's serving design with none of Kiln's code: node:http reads each npy body, the requests
// waiting are stacked into one batch (up to 32, no delay) for one worker thread that runs the
// onnxruntime-node session, and each row goes back as its own npy answer. No limits, errors,
// metrics or logs. bench/server runs it next to Kiln as a reference, not as a peer: what one
// main thread can serve with this design, so Kiln's own cost per request shows against it.
// `node floor-server.mjs <model.onnx> <port>`; batches rows along the first axis.
import http from 'node:http';
import { Worker } from 'node:worker_threads';
import ort from 'onnxruntime-node';
import { readNpy, writeNpy } from './naive-npy.mjs';

const [modelPath, port] = process.argv.slice(2);
const MAX_BATCH = 32;

const worker = new Worker(new URL('./floor-worker.mjs', import.meta.url), {
  workerData: { modelPath },
});
await new Promise((resolve) => worker.once('message', resolve));

let waiting = [];
let inFlight;

function dispatch() {
  if (inFlight || waiting.length === 0) return;
  inFlight = waiting.slice(0, MAX_BATCH);
  waiting = waiting.slice(MAX_BATCH);
  const inputs = inFlight.map((request) => request.input);
  const rows = inputs.reduce((sum, input) => sum + input.dims[0], 0);
  const data = new Float32Array(inputs.reduce((sum, input) => sum + input.data.length, 0));
  let offset = 0;
  for (const input of inputs) {
    data.set(input.data, offset);
    offset += input.data.length;
  }
  worker.postMessage({ data, dims: [rows, ...inputs[0].dims.slice(1)] }, [data.buffer]);
}

worker.on('message', ({ data, dims }) => {
  const batch = inFlight;
  inFlight = undefined;
  dispatch();
  const rowSize = dims.slice(1).reduce((a, b) => a * b, 1);
  let row = 0;
  for (const { res, input } of batch) {
    const rows = input.dims[0];
    const out = data.subarray(row * rowSize, (row + rows) * rowSize);
    row += rows;
    const body = writeNpy(new ort.Tensor('float32', out, [rows, ...dims.slice(1)]));
    res.writeHead(200, { 'content-type': 'tensor/npy', 'content-length': body.length });
    res.end(body);
  }
});

http
  .createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/ping') {
        res.end('{"status":"Healthy"}');
        return;
      }
      waiting.push({ res, input: readNpy(Buffer.concat(chunks)) });
      dispatch();
    });
  })
  .listen(Number(port), '127.0.0.1', () => process.send?.('ready'));
