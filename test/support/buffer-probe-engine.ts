// A test engine that reports where its input tensor's memory lives, so that a test can tell
// whether a request's bytes were copied on their way from the socket to the engine.
import { threadId } from 'node:worker_threads';
import {
  CPU,
  ENGINE_SPECIFICATION_VERSION,
  type EngineProvider,
  type ExecutionContext,
  type Model,
  type ModelLoadRequest,
  NDList,
  Tensor,
} from '@kiln/core';

export const PROBE_FILE = 'model.probe';

/**
 * Output `where`: [input byteLength, its buffer's byteLength, its byteOffset, engine thread id,
 * the sum of its values] (the sum shows the values arrived intact).
 */
class ProbeContext implements ExecutionContext {
  async forward(input: NDList): Promise<NDList> {
    const data = input.get(0).data as Float32Array;
    let sum = 0;
    for (const value of data) sum += value;
    const where = Float64Array.of(
      data.byteLength,
      data.buffer.byteLength,
      data.byteOffset,
      threadId,
      sum,
    );
    return NDList.of(new Tensor('float64', where, [5], 'where'));
  }

  async close(): Promise<void> {}
}

function probeModel(request: ModelLoadRequest): Model {
  return {
    name: request.name,
    engine: 'BufferProbe',
    device: CPU,
    modelDir: request.modelDir,
    inputs: [{ name: 'x', dtype: 'float32' }],
    outputs: [{ name: 'where', dtype: 'float64', shape: [5] }],
    properties: request.properties,
    describe: () => ({ engine: 'BufferProbe' }),
    newExecutionContext: () => Promise.resolve(new ProbeContext()),
    dispose: () => Promise.resolve(),
  };
}

export const provider: EngineProvider = {
  specificationVersion: ENGINE_SPECIFICATION_VERSION,
  name: 'BufferProbe',
  rank: 0,
  execution: 'blocking',
  recognizes: (files) => files.includes(PROBE_FILE),
  load: () =>
    Promise.resolve({
      name: 'BufferProbe',
      version: '1',
      devices: () => [CPU],
      describe: () => ({}),
      loadModel: (request: ModelLoadRequest) => Promise.resolve(probeModel(request)),
    }),
};
