// A test engine that writes down every forward it runs, so that a test can tell which batch
// sizes a model ran before it was ready: `y = x · 2` over float32 `x` [-1, 3]. Each forward
// appends its batch size to the file named by `option.forwardLog`, and first waits while the
// file named by `option.gateFile` is missing (a warm-up a test holds, to look at /ping).
import { appendFileSync, existsSync } from 'node:fs';
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

export const COUNTER_FILE = 'model.counter';

class CounterContext implements ExecutionContext {
  constructor(private readonly options: Readonly<Record<string, string>>) {}

  async forward(input: NDList): Promise<NDList> {
    const { gateFile, forwardLog } = this.options;
    while (gateFile && !existsSync(gateFile))
      await new Promise((resolve) => setTimeout(resolve, 20));
    const x = input.get(0);
    if (forwardLog) appendFileSync(forwardLog, `${x.shape[0]}\n`);
    const data = x.data as Float32Array;
    return NDList.of(
      new Tensor(
        'float32',
        data.map((v) => v * 2),
        x.shape,
        'y',
      ),
    );
  }

  async close(): Promise<void> {}
}

function counterModel(request: ModelLoadRequest): Model {
  return {
    name: request.name,
    engine: 'WarmupCounter',
    device: CPU,
    modelDir: request.modelDir,
    inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 3] }],
    outputs: [{ name: 'y', dtype: 'float32', shape: [-1, 3] }],
    properties: request.properties,
    describe: () => ({ engine: 'WarmupCounter' }),
    newExecutionContext: () => Promise.resolve(new CounterContext(request.options)),
    dispose: () => Promise.resolve(),
  };
}

export const provider: EngineProvider = {
  specificationVersion: ENGINE_SPECIFICATION_VERSION,
  name: 'WarmupCounter',
  rank: 0,
  execution: 'blocking',
  // Its option.* keys reach the model; none is unknown.
  passesSettingsToModel: true,
  recognizes: (files) => files.includes(COUNTER_FILE),
  load: () =>
    Promise.resolve({
      name: 'WarmupCounter',
      version: '1',
      devices: () => [CPU],
      describe: () => ({}),
      loadModel: (request: ModelLoadRequest) => Promise.resolve(counterModel(request)),
    }),
};
