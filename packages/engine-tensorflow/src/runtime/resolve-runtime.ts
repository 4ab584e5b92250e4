import { KilnError, KilnErrorCode } from '@kiln/core';
import { BACKEND_INFO, TF_BACKENDS, type TfBackendName } from './backends.js';
import {
  PackageMissingError,
  importPackage,
  moduleExports,
  packageVersion,
  wasmBinaryFolder,
} from './packages.js';
import type { TfApi, TfjsNodeApi } from './tfjs-api.js';
import { type NativeThreads, readThreadEnv } from './thread-settings.js';

/** Why a better backend was not used. */
export interface BackendSkip {
  readonly backend: TfBackendName;
  readonly reason: string;
}

/** What a resolved runtime reports about itself; plain data, so it crosses threads. */
export interface TfRuntimeFacts {
  readonly backend: TfBackendName;
  /** The package that brought the backend, and its version. */
  readonly packageName: string;
  readonly packageVersion: string;
  /** Version of tfjs-core, the engine every backend runs under. */
  readonly tfjsVersion: string;
  /** Whether native TensorFlow runs on a GPU (tfjs-node-gpu with a usable CUDA device). */
  readonly gpu: boolean;
  /** wasm only: SIMD instructions in use. */
  readonly simd: boolean | undefined;
  /** Whether one execution may use several threads inside the backend. */
  readonly multithreaded: boolean;
  /** Native TensorFlow: the thread counts it read when it loaded (undefined: its default). */
  readonly nativeThreads: NativeThreads | undefined;
  /** Every better backend, with why it was not used. */
  readonly skipped: readonly BackendSkip[];
}

/** A tfjs runtime ready in this thread. */
export interface TfRuntime {
  readonly tf: TfApi;
  /** tfjs-node's `tf.node` (SavedModel support); absent on the JavaScript backends. */
  readonly node: TfjsNodeApi | undefined;
  readonly facts: TfRuntimeFacts;
}

type LoadedBackend = Omit<TfRuntime, 'facts'> & {
  facts: Omit<TfRuntimeFacts, 'skipped' | 'backend'>;
};

const LOADERS: Readonly<Record<TfBackendName, () => Promise<LoadedBackend>>> = {
  'tfjs-node-gpu': () => loadNative('tfjs-node-gpu'),
  'tfjs-node': () => loadNative('tfjs-node'),
  wasm: loadWasm,
  cpu: loadCpu,
};

// tfjs keeps one active backend per JavaScript realm (thread), so this thread resolves once.
let resolved: Promise<TfRuntime> | undefined;

/**
 * The tfjs runtime of this thread: the first of `preference` that loads. Later calls get the
 * same runtime; asking for a backend other than the one this thread already runs is an error,
 * because tfjs cannot run two backends side by side in one thread.
 */
export async function resolveRuntime(preference: readonly TfBackendName[]): Promise<TfRuntime> {
  resolved ??= loadFirst(preference);
  let runtime: TfRuntime;
  try {
    runtime = await resolved;
  } catch (error) {
    resolved = undefined; // nothing was set up: a later call may try again
    throw error;
  }
  if (!preference.includes(runtime.facts.backend)) {
    throw new KilnError(
      KilnErrorCode.EngineUnavailable,
      `this thread already runs TensorFlow.js on the ${runtime.facts.backend} backend and tfjs holds one backend per thread, so it cannot also run ${preference.join(' or ')}; use another worker thread for it`,
    );
  }
  return runtime;
}

async function loadFirst(preference: readonly TfBackendName[]): Promise<TfRuntime> {
  const skipped: BackendSkip[] = [];
  for (const backend of TF_BACKENDS) {
    if (!preference.includes(backend)) continue;
    try {
      const loaded = await LOADERS[backend]();
      return {
        ...loaded,
        facts: { ...loaded.facts, backend, skipped: withUnrequested(skipped, backend, preference) },
      };
    } catch (error) {
      skipped.push({ backend, reason: skipReason(backend, error) });
    }
  }
  throw new KilnError(
    KilnErrorCode.EngineUnavailable,
    `no TensorFlow.js backend could be loaded:\n  ${skipped.map((s) => `${s.backend}: ${s.reason}`).join('\n  ')}`,
    { details: { skipped } },
  );
}

/** Adds the better backends that were left out of the preference, so none goes unexplained. */
function withUnrequested(
  skipped: readonly BackendSkip[],
  chosen: TfBackendName,
  preference: readonly TfBackendName[],
): BackendSkip[] {
  const better = TF_BACKENDS.slice(0, TF_BACKENDS.indexOf(chosen));
  return better.map(
    (backend) =>
      skipped.find((s) => s.backend === backend) ??
      (preference.includes(backend)
        ? { backend, reason: 'not tried' }
        : { backend, reason: 'not requested (backend option or KILN_TENSORFLOW_BACKEND)' }),
  );
}

function skipReason(backend: TfBackendName, error: unknown): string {
  if (error instanceof PackageMissingError) {
    return `${error.packageName} is not installed (${BACKEND_INFO[backend].install})`;
  }
  return error instanceof Error ? error.message : String(error);
}

async function loadTfjs(): Promise<TfApi> {
  return moduleExports<TfApi>(await importPackage('@tensorflow/tfjs'));
}

function coreVersion(tf: TfApi): string {
  return (tf as { version_core?: string }).version_core ?? packageVersion('@tensorflow/tfjs-core');
}

async function activate(tf: TfApi, backend: string): Promise<void> {
  // setBackend reports a failed initialisation as `false` (the cause goes to tfjs's log).
  if (!(await tf.setBackend(backend))) {
    throw new Error(`tfjs could not initialise its ${backend} backend`);
  }
  await tf.ready();
}

async function loadNative(backend: 'tfjs-node' | 'tfjs-node-gpu'): Promise<LoadedBackend> {
  const { packageName } = BACKEND_INFO[backend];
  // tfjs-node re-exports the whole tfjs API with its 'tensorflow' backend registered.
  const tf = moduleExports<TfApi & { node?: TfjsNodeApi }>(await importPackage(packageName));
  await activate(tf, 'tensorflow');
  const gpu = (tf.backend() as { isUsingGpuDevice?: unknown }).isUsingGpuDevice === true;
  return {
    tf,
    node: tf.node,
    facts: {
      packageName,
      packageVersion: packageVersion(packageName),
      tfjsVersion: coreVersion(tf),
      gpu,
      simd: undefined,
      multithreaded: true,
      nativeThreads: readThreadEnv(process.env),
    },
  };
}

async function loadWasm(): Promise<LoadedBackend> {
  const tf = await loadTfjs();
  const wasm = moduleExports<{ setWasmPaths(prefix: string): void }>(
    await importPackage('@tensorflow/tfjs-backend-wasm'),
  );
  try {
    wasm.setWasmPaths(wasmBinaryFolder());
  } catch (error) {
    // Someone in this thread initialised the wasm backend already; its binaries stay in use.
    if (!(error instanceof Error && error.message.includes('already initialized'))) throw error;
  }
  await activate(tf, 'wasm');
  return {
    tf,
    node: undefined,
    facts: {
      packageName: BACKEND_INFO.wasm.packageName,
      packageVersion: packageVersion(BACKEND_INFO.wasm.packageName),
      tfjsVersion: coreVersion(tf),
      gpu: false,
      simd: (await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT')) === true,
      // Emscripten's threads are not available to the wasm backend under Node.
      multithreaded: (await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT')) === true,
      nativeThreads: undefined,
    },
  };
}

async function loadCpu(): Promise<LoadedBackend> {
  const tf = await loadTfjs();
  await activate(tf, 'cpu');
  return {
    tf,
    node: undefined,
    facts: {
      packageName: BACKEND_INFO.cpu.packageName,
      packageVersion: packageVersion(BACKEND_INFO.cpu.packageName),
      tfjsVersion: coreVersion(tf),
      gpu: false,
      simd: undefined,
      multithreaded: false,
      nativeThreads: undefined,
    },
  };
}
