import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import {
  CPU,
  ENGINE_SPECIFICATION_VERSION,
  type Engine,
  type EngineProvider,
  type ExecutionContext,
  type ForwardOptions,
  type ExecutionContextOptions,
  KilnError,
  KilnErrorCode,
  type Model,
  type ModelLoadRequest,
  NDList,
  Tensor,
} from '@kiln/core';
import { allowedCores } from '../cpu-pinning.js';

/**
 * A small real engine for the pool's tests: `y = x · factor` over float32 `x` [-1, -1], where
 * `factor` comes from the model file `model.scale`. Its run is synchronous (`option.busyMs`
 * spins the thread, like ONNX Runtime) and may also wait (`option.sleepMs`). Values in `x`
 * trigger failures:
 * - 666: the thread exits (process.exit inside a worker thread)
 * - 667: an uncaught error is thrown on the thread
 * - 668: this forward throws an engine error
 * - 669: the thread spins forever (an engine stuck in a loop)
 *
 * It declares a `gpu0` as well, computed on the CPU like everything else, so that per-device
 * worker groups can be tested on machines without a GPU.
 */
export const CRASH_EXIT = 666;
export const CRASH_UNCAUGHT = 667;
export const FAIL_FORWARD = 668;
export const HANG_FOREVER = 669;
/** Waits until the run's signal aborts, then fails with CANCELLED: shows a run was aborted. */
export const WAIT_FOR_ABORT = 670;
export const MODEL_FILE = 'model.scale';

class ScaleContext implements ExecutionContext {
  constructor(
    private readonly factor: number,
    private readonly busyMs: number,
    private readonly sleepMs: number,
  ) {}

  async forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    const x = input.get(0);
    if (x.dtype !== 'float32')
      throw new KilnError(KilnErrorCode.UnsupportedDType, 'x must be float32');
    const data = x.data as Float32Array;
    if (data.includes(CRASH_EXIT)) crash(() => process.exit(3));
    if (data.includes(CRASH_UNCAUGHT)) {
      crash(() =>
        setImmediate(() => {
          throw new Error('scale engine blew up');
        }),
      );
      await new Promise(() => {});
    }
    if (data.includes(FAIL_FORWARD))
      throw new KilnError(KilnErrorCode.EngineError, 'scale engine refused 668');
    if (data.includes(HANG_FOREVER)) crash(spinForever);
    if (data.includes(WAIT_FOR_ABORT)) {
      const signal = options.signal;
      if (!signal) throw new KilnError(KilnErrorCode.Internal, 'the run has no signal');
      if (!signal.aborted)
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      throw new KilnError(KilnErrorCode.Cancelled, 'scale engine saw its run aborted');
    }
    const until = performance.now() + this.busyMs;
    while (performance.now() < until) {
      // spins: the run is synchronous on purpose
    }
    if (this.sleepMs > 0) await new Promise((resolve) => setTimeout(resolve, this.sleepMs));
    const y = new Float32Array(data.length);
    for (let i = 0; i < data.length; i++) y[i] = data[i]! * this.factor;
    return NDList.of(new Tensor('float32', y, x.shape, 'y'));
  }

  async close(): Promise<void> {}
}

function spinForever(): void {
  for (;;) {
    // only terminating the thread ends this
  }
}

/** Failures that would end the test runner itself are refused on the main thread. */
function crash(action: () => void): void {
  if (isMainThread)
    throw new KilnError(KilnErrorCode.EngineError, 'crash triggers work only on worker threads');
  action();
}

export async function loadScaleModel(request: ModelLoadRequest): Promise<Model> {
  const file = path.join(request.modelDir, request.modelFile ?? MODEL_FILE);
  const { factor } = JSON.parse(await readFile(file, 'utf8')) as { factor: number };
  const busyMs = Number(request.options.busyMs ?? 0);
  const sleepMs = Number(request.options.sleepMs ?? 0);
  const contexts: { intraOpThreads: number | undefined }[] = [];
  return {
    name: request.name,
    engine: 'TestScale',
    device: request.device,
    modelDir: request.modelDir,
    inputs: [{ name: 'x', dtype: 'float32', shape: [-1, -1] }],
    outputs: [{ name: 'y', dtype: 'float32', shape: [-1, -1] }],
    properties: request.properties,
    describe: () => ({
      factor,
      device: request.device,
      threadId,
      isMainThread,
      contexts,
      allowedCores: allowedCores(),
    }),
    async newExecutionContext(options: ExecutionContextOptions = {}) {
      contexts.push({ intraOpThreads: options.intraOpThreads });
      return new ScaleContext(factor, busyMs, sleepMs);
    },
    async dispose() {},
  };
}

export const provider: EngineProvider = {
  specificationVersion: ENGINE_SPECIFICATION_VERSION,
  name: 'TestScale',
  rank: 1,
  recognizes: (fileNames) => fileNames.includes(MODEL_FILE),
  async load(): Promise<Engine> {
    // Counted across module copies, for tests of who loads the engine when.
    const counter = globalThis as { kilnScaleEngineLoads?: number };
    counter.kilnScaleEngineLoads = (counter.kilnScaleEngineLoads ?? 0) + 1;
    return {
      name: 'TestScale',
      version: '1.0.0',
      devices: () => [CPU, { type: 'gpu', id: 0 }],
      describe: () => ({}),
      loadModel: loadScaleModel,
    };
  },
};
