import { ENGINE_SPECIFICATION_VERSION, type EngineProvider } from '@kiln/core';
import { TENSORFLOW_ENGINE_NAME } from './engine-name.js';
import { TF_OPTIONS } from './options.js';
import { SAVED_MODEL_FILES, TFJS_MODEL_FILE } from './io/locate-model.js';
import { BACKEND_INFO, type TfBackendName, backendPreference } from './runtime/backends.js';
import { isPackageInstalled } from './runtime/packages.js';
import type { TfThreadOptions } from './runtime/thread-settings.js';
import type { TfEngine } from './tf-engine.js';

/** Below OnnxRuntime (10) and PyTorch (9): chosen by rank only when they cannot load. */
export const TENSORFLOW_ENGINE_RANK = 8;

export interface TensorFlowEngineOptions extends TfThreadOptions {
  /** Preference when no engine is named; 8 by default. */
  readonly rank?: number;
  /**
   * One backend to force, or several to try, best first. Default: KILN_TENSORFLOW_BACKEND
   * when set, else tfjs-node-gpu, tfjs-node, wasm, cpu.
   */
  readonly backend?: TfBackendName | readonly TfBackendName[];
  /** Environment to read KILN_TENSORFLOW_BACKEND from and write thread settings to (default process.env). */
  readonly env?: Record<string, string | undefined>;
}

/**
 * A TensorFlow engine provider. Loading it picks the best tfjs backend that works in the
 * loading thread; models run in that thread. tfjs-node loads in one thread per process, so
 * where it is installed the worker pool hosts every TensorFlow worker on one shared thread;
 * the JavaScript backends (wasm, cpu) load in any thread, so each worker gets its own, or
 * runs on the calling thread when the model is small (the pool's placement).
 */
export function createTensorFlowEngine(options: TensorFlowEngineOptions = {}): EngineProvider {
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name: TENSORFLOW_ENGINE_NAME,
    rank: options.rank ?? TENSORFLOW_ENGINE_RANK,
    execution: 'blocking',
    options: TF_OPTIONS,
    get hostThread() {
      return nativeBackendFirst(options) ? 'shared' : 'per-worker';
    },
    // model.json, a SavedModel, or any other TF.js json beside its .bin weight shards.
    recognizes: (fileNames) =>
      fileNames.some(
        (f) => f === TFJS_MODEL_FILE || (SAVED_MODEL_FILES as readonly string[]).includes(f),
      ) ||
      (fileNames.some((f) => f.endsWith('.json')) && fileNames.some((f) => f.endsWith('.bin'))),
    load: () => loadEngine(options),
  };
}

/** Whether the backend a load would try first among those installed is native TensorFlow. */
function nativeBackendFirst(options: TensorFlowEngineOptions): boolean {
  let backends: TfBackendName[];
  try {
    backends = backendPreference(options.backend, options.env ?? process.env);
  } catch {
    return true; // a bad preference fails at load; until then assume the strictest threading
  }
  const first = backends.find((b) => isPackageInstalled(BACKEND_INFO[b].packageName));
  return first !== undefined && BACKEND_INFO[first].native;
}

/** The default TensorFlow provider (every backend, best first). */
export const provider: EngineProvider = createTensorFlowEngine();

/** The engine's modules are imported here, when a model first needs it. */
async function loadEngine(options: TensorFlowEngineOptions): Promise<TfEngine> {
  const [
    { resolveRuntime },
    { describeThreads, exportThreadOptions },
    { TfEngine },
    { TfModelLoader },
  ] = await Promise.all([
    import('./runtime/resolve-runtime.js'),
    import('./runtime/thread-settings.js'),
    import('./tf-engine.js'),
    import('./tf-model.js'),
  ]);
  const env = options.env ?? process.env;
  const backends = backendPreference(options.backend, env);
  // Native TensorFlow reads its thread settings once, when it loads.
  exportThreadOptions(options, env);
  const models = new TfModelLoader(await resolveRuntime(backends));
  return new TfEngine(models, describeThreads(models.facts, options));
}
