// Entry of a decoder worker thread: one ONNX Runtime session and the KV caches of every
// sequence it decodes, so that steps move token ids in and logits out, never the caches.
import { statSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { SessionRunner } from '../session-runner.js';
import { readDecoderSignature } from './decoder-signature.js';
import type { DecoderReply, DecoderRequest, DecoderWorkerData } from './decoder-protocol.js';
import { KvBatchRunner } from './kv-batch-runner.js';
import { decodeRunCost } from './past-groups.js';

const port = parentPort!;
const data = workerData as DecoderWorkerData;
const reply = (message: DecoderReply, transfer: ArrayBuffer[] = []) =>
  port.postMessage(message, transfer);
const serialize = (error: unknown) => KilnError.wrap(error, KilnErrorCode.EngineError).toJSON();

let session: SessionRunner | undefined;
let batches: KvBatchRunner | undefined;
/** ONNX Runtime's own time in the current step, apart from the caches' copying around it. */
let sessionMs = 0;
try {
  session = await SessionRunner.create(data.modelPath, data.config);
  const runner = session;
  const signature = readDecoderSignature(runner.inputs, runner.outputs);
  batches = new KvBatchRunner(
    async (inputs) => {
      const { output, timing } = await runner.run(inputs);
      sessionMs += timing.runMs;
      return output;
    },
    signature,
    data.maxSequenceLength,
    data.decodeRunCost ??
      decodeRunCost(
        statSync(data.modelPath).size,
        signature.layers * 2 * signature.heads * signature.headSize * 4,
      ),
  );
  reply({ type: 'ready', signature });
} catch (error) {
  await session?.close();
  // The owner terminates this thread when it reads the failure.
  reply({ type: 'start-failed', error: serialize(error) });
}

// Requests are handled in order, so a release or close never overtakes a step.
let queue = Promise.resolve();
if (session && batches) {
  const [s, b] = [session, batches];
  port.on('message', (request: DecoderRequest) => {
    queue = queue.then(() => handle(s, b, request));
  });
}

async function handle(s: SessionRunner, b: KvBatchRunner, request: DecoderRequest): Promise<void> {
  switch (request.type) {
    case 'release':
      b.release(request.sequence);
      return;
    case 'close':
      await s.close().catch(() => undefined);
      reply({ type: 'closed', id: request.id });
      return;
    case 'step': {
      try {
        const started = performance.now();
        sessionMs = 0;
        const rows = await b.step(request.entries);
        const vocab = b.signature.vocabSize;
        const logits = new Float32Array(rows.length * vocab);
        rows.forEach((row, i) => logits.set(row, i * vocab));
        reply(
          {
            type: 'logits',
            id: request.id,
            logits,
            allocatedFloats: b.allocatedFloats,
            runMs: performance.now() - started,
            sessionMs,
          },
          [logits.buffer],
        );
      } catch (error) {
        // A failed step leaves its sequences' caches unusable; the owner retires them.
        for (const entry of request.entries) b.release(entry.id);
        reply({ type: 'failed', id: request.id, error: serialize(error) });
      }
    }
  }
}
