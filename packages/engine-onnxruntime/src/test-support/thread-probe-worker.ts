// Loaded in a worker thread by a test: reports where a context made there runs its session.
import { parentPort, workerData } from 'node:worker_threads';
import { NDList, Tensor } from '@kiln/core';
import { loadOrtModel } from './load.js';

const model = await loadOrtModel((workerData as { modelDir: string }).modelDir);
const context = await model.newExecutionContext();
const output = await context.forward(
  NDList.of(new Tensor('float32', Float32Array.of(-2, 0, 1, 5), [1, 4], 'x')),
);
parentPort!.postMessage({
  sessionThread: context.thread,
  y: Array.from(output.get(0).data as Float32Array),
});
await model.dispose();
