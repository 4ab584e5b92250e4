import { CPU, ENGINE_SPECIFICATION_VERSION, type Engine, type EngineProvider } from '@kiln/core';
import { loadScaleModel } from './scale-engine.js';

/** Where a test puts the promise every model load of this engine waits for. */
export const LOAD_GATE = Symbol.for('kiln.test.asyncScaleEngine.loadGate');

/**
 * The scale engine as an async one (as LibTorch and Python are): its models load once, on the
 * calling thread, each after the promise at `globalThis[LOAD_GATE]` settles — the engine module
 * may be imported apart from the test's own copy, so the gate lives on globalThis.
 */
export const provider: EngineProvider = {
  specificationVersion: ENGINE_SPECIFICATION_VERSION,
  name: 'TestAsyncScale',
  rank: 1,
  execution: 'async',
  recognizes: (fileNames) => fileNames.includes('model.scale'),
  async load(): Promise<Engine> {
    return {
      name: 'TestAsyncScale',
      version: '1.0.0',
      devices: () => [CPU],
      describe: () => ({}),
      loadModel: async (request) => {
        await (globalThis as { [LOAD_GATE]?: Promise<void> })[LOAD_GATE];
        return loadScaleModel(request);
      },
    };
  },
};
