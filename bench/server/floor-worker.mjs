// floor-server.mjs's worker thread: one onnxruntime-node session, one batch at a time, one
// intra-op thread that does not spin (on two cores a spinning pool takes the main thread's
// core); the first output goes back with its buffer moved, not copied.
import { parentPort, workerData } from 'node:worker_threads';
import ort from 'onnxruntime-node';

const session = await ort.InferenceSession.create(workerData.modelPath, {
  intraOpNumThreads: 1,
  extra: { session: { intra_op: { allow_spinning: '0' } } },
});
parentPort.on('message', async ({ data, dims }) => {
  const results = await session.run({
    [session.inputNames[0]]: new ort.Tensor('float32', data, dims),
  });
  const output = results[session.outputNames[0]];
  parentPort.postMessage({ data: output.data, dims: output.dims }, [output.data.buffer]);
});
parentPort.postMessage('ready');
