// Entry of a TensorFlow host thread: resolves a tfjs runtime, then loads and runs models on
// request from the thread that started it. tfjs runs synchronously on the thread that calls
// it, so this is where inference blocks, not the caller's event loop.
import { parentPort, workerData } from 'node:worker_threads';
import {
  KilnError,
  KilnErrorCode,
  TransferList,
  ndListFromMessage,
  ndListToMessage,
} from '@kiln/core';
import { loadTfModel } from '../model/load-model.js';
import { memoryOf } from '../runtime/memory.js';
import { type TfRuntime, resolveRuntime } from '../runtime/resolve-runtime.js';
import {
  HOST_ERROR_CODE,
  type HostConfig,
  type HostReply,
  type HostRequest,
  type HostStatus,
  type HostedModelFacts,
  serializeError,
} from './host-protocol.js';
import { TfModelRunner } from './model-runner.js';

const port = parentPort!;
const config = workerData as HostConfig;
const runners = new Map<number, TfModelRunner>();
let nextHandle = 1;

async function handle(
  runtime: TfRuntime,
  request: HostRequest,
): Promise<{ reply: HostReply; transfer: ArrayBuffer[] }> {
  switch (request.op) {
    case 'load': {
      const model = await loadTfModel(runtime, request.spec);
      const handle = nextHandle++;
      runners.set(handle, new TfModelRunner(runtime, request.spec.name, model));
      const value: HostedModelFacts = {
        handle,
        format: model.format,
        inputs: model.inputs,
        outputs: model.outputs,
        facts: model.facts,
      };
      return { reply: { id: request.id, ok: true, value }, transfer: [] };
    }
    case 'forward': {
      const output = await runner(request.handle).run(ndListFromMessage(request.inputs));
      // Output arrays are fresh (see fromTfTensor), so they can be moved, not copied.
      const transfer = new TransferList('move');
      const value = ndListToMessage(output, transfer);
      return { reply: { id: request.id, ok: true, value }, transfer: transfer.transfer };
    }
    case 'unload':
      runners.get(request.handle)?.dispose();
      runners.delete(request.handle);
      return { reply: { id: request.id, ok: true, value: null }, transfer: [] };
    case 'memory':
      return { reply: { id: request.id, ok: true, value: memoryOf(runtime.tf) }, transfer: [] };
  }
}

function runner(handle: number): TfModelRunner {
  const found = runners.get(handle);
  if (!found)
    throw new KilnError(
      KilnErrorCode.Closed,
      `model handle ${handle} is not loaded in this TensorFlow thread`,
    );
  return found;
}

try {
  const runtime = await resolveRuntime(config.backends);
  // This thread is Kiln's alone: tfjs's console advice (such as "install tfjs-node") is
  // already in the engine's description, once, instead of once per thread.
  runtime.tf.env().set('PROD', true);
  port.on('message', (request: HostRequest) => {
    handle(runtime, request).then(
      ({ reply, transfer }) => port.postMessage(reply, transfer),
      (error: unknown) => {
        const reply: HostReply = {
          id: request.id,
          ok: false,
          error: serializeError(error, HOST_ERROR_CODE[request.op]),
        };
        port.postMessage(reply);
      },
    );
  });
  port.postMessage({ status: 'ready', facts: runtime.facts } satisfies HostStatus);
} catch (error) {
  port.postMessage({
    status: 'failed',
    error: serializeError(error, KilnErrorCode.EngineUnavailable),
  } satisfies HostStatus);
  port.close();
}
