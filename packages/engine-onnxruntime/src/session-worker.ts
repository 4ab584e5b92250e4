// Entry of an OnnxRuntime session worker thread: creates one session, then answers run,
// end-profiling and close requests one at a time. Runs block this thread, never the owner's.
import { parentPort, workerData } from 'node:worker_threads';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { fromWire, ownBuffers, toWire, transferables } from './ort-tensors.js';
import { SessionRunner } from './session-runner.js';
import type { SessionReply, SessionRequest, SessionWorkerData } from './worker-protocol.js';

const port = parentPort!;
const data = workerData as SessionWorkerData;
const reply = (message: SessionReply, transfer: ArrayBuffer[] = []) => {
  try {
    port.postMessage(message, transfer);
  } catch (error) {
    // A buffer the runtime owns cannot move between threads: send a copy instead.
    if (transfer.length === 0) throw error;
    port.postMessage(message);
  }
};
const serialize = (error: unknown) => KilnError.wrap(error, KilnErrorCode.EngineError).toJSON();

let runner: SessionRunner | undefined;
try {
  runner = await SessionRunner.create(data.modelPath, data.config);
  reply({ type: 'ready', inputs: runner.inputs, outputs: runner.outputs });
} catch (error) {
  // The owner terminates this thread when it reads the failure.
  reply({ type: 'start-failed', error: serialize(error) });
}

// Requests are chained so that a close waits for the run before it.
let queue = Promise.resolve();
if (runner) {
  const session = runner;
  port.on('message', (request: SessionRequest) => {
    queue = queue.then(() => handle(session, request));
  });
}

async function handle(session: SessionRunner, request: SessionRequest): Promise<void> {
  try {
    switch (request.type) {
      case 'run': {
        const { output, timing } = await session.run(fromWire(request.inputs));
        const outputs = toWire(output);
        const inputBuffers = ownBuffers(request.inputs);
        reply({ type: 'outputs', id: request.id, outputs, timing, inputBuffers }, [
          ...transferables(outputs),
          ...inputBuffers,
        ]);
        return;
      }
      case 'end-profiling':
        reply({
          type: 'profile',
          id: request.id,
          profile: await session.endProfiling({ skipRuns: request.skipRuns }),
        });
        return;
      case 'close':
        await session.close();
        reply({ type: 'closed', id: request.id });
        return;
    }
  } catch (error) {
    reply({ type: 'failed', id: request.id, error: serialize(error) });
  }
}
