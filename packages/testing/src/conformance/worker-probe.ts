// Runs inside a worker thread for the conformance suite: registers the engine from its
// provider module, loads a model and runs one forward, proving the engine loads off the
// main thread.
import { parentPort, workerData } from 'node:worker_threads';
import { type Device, EngineRegistry, NDList, Tensor, type EngineProvider } from '@kiln/core';
import { readFixtureProperties } from './fixture-properties.js';

interface ProbeData {
  providerModule: string;
  engineName: string;
  device: Device;
  modelDir: string;
  input: Float32Array;
  shape: number[];
}

const data = workerData as ProbeData;
try {
  const module = (await import(data.providerModule)) as { provider: EngineProvider };
  const registry = new EngineRegistry({});
  registry.register(module.provider);
  const engine = await registry.get(data.engineName);
  const properties = readFixtureProperties(data.modelDir);
  const model = await engine.loadModel({
    name: 'probe',
    modelDir: data.modelDir,
    device: data.device,
    options: properties.options,
    properties,
  });
  const context = await model.newExecutionContext();
  const output = await context.forward(
    NDList.of(new Tensor('float32', data.input, data.shape, 'x')),
  );
  const y = output.get(0);
  parentPort!.postMessage({
    ok: true,
    data: Array.from(y.data as Float32Array),
    shape: [...y.shape],
  });
  await context.close();
  await model.dispose();
} catch (error) {
  parentPort!.postMessage({
    ok: false,
    message: error instanceof Error ? error.message : String(error),
  });
}
