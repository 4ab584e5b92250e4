// A test engine whose worker dies on a marked input, as one hit by a native abort would:
// `y = x + 1` over float32 `x` [-1, -1] (a batch axis, so the server batches it adaptively),
// and an input holding KILL_WORKER ends its worker thread (process.exit inside a worker).
import { isMainThread } from 'node:worker_threads';
import {
  CPU,
  ENGINE_SPECIFICATION_VERSION,
  type EngineProvider,
  type ExecutionContext,
  KilnError,
  KilnErrorCode,
  type Model,
  type ModelLoadRequest,
  NDList,
  Tensor,
} from '@kiln/core';

export const KILLER_FILE = 'model.killer';
export const KILL_WORKER = -666;

class KillerContext implements ExecutionContext {
  async forward(input: NDList): Promise<NDList> {
    const x = input.get(0);
    const data = x.data as Float32Array;
    if (data.includes(KILL_WORKER)) {
      // Only a worker thread may die: on the main thread it would end the test runner.
      if (isMainThread)
        throw new KilnError(KilnErrorCode.EngineError, 'the killer runs on worker threads only');
      process.exit(3);
    }
    return NDList.of(
      new Tensor(
        'float32',
        data.map((v) => v + 1),
        x.shape,
        'y',
      ),
    );
  }

  async close(): Promise<void> {}
}

function killerModel(request: ModelLoadRequest): Model {
  return {
    name: request.name,
    engine: 'WorkerKiller',
    device: CPU,
    modelDir: request.modelDir,
    inputs: [{ name: 'x', dtype: 'float32', shape: [-1, -1] }],
    outputs: [{ name: 'y', dtype: 'float32', shape: [-1, -1] }],
    properties: request.properties,
    describe: () => ({ engine: 'WorkerKiller' }),
    newExecutionContext: () => Promise.resolve(new KillerContext()),
    dispose: () => Promise.resolve(),
  };
}

export const provider: EngineProvider = {
  specificationVersion: ENGINE_SPECIFICATION_VERSION,
  name: 'WorkerKiller',
  rank: 0,
  execution: 'blocking',
  recognizes: (files) => files.includes(KILLER_FILE),
  load: () =>
    Promise.resolve({
      name: 'WorkerKiller',
      version: '1',
      devices: () => [CPU],
      describe: () => ({}),
      loadModel: (request: ModelLoadRequest) => Promise.resolve(killerModel(request)),
    }),
};
