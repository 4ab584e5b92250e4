import { BACKEND_INFO, TF_BACKENDS, type TfBackendName } from './runtime/backends.js';
import { importPackage, wasmBinaryFolder } from './runtime/packages.js';
import { resolveRuntime } from './runtime/resolve-runtime.js';

/**
 * Null when `backend` can run here, else why not (for checkEngine in tests). The JavaScript
 * backends are checked cheaply: their packages import and the wasm binaries are present.
 * Native TensorFlow is really loaded, in this thread, which then keeps it: tfjs-node loads in
 * one thread per process.
 */
export async function probeTensorFlow(backend: TfBackendName = 'wasm'): Promise<string | null> {
  if (!TF_BACKENDS.includes(backend)) return `unknown TensorFlow backend ${backend}`;
  try {
    if (BACKEND_INFO[backend].native) {
      await resolveRuntime([backend]);
    } else {
      await importPackage('@tensorflow/tfjs');
      if (backend === 'wasm') {
        await importPackage(BACKEND_INFO.wasm.packageName);
        wasmBinaryFolder();
      }
    }
    return null;
  } catch (error) {
    return `${error instanceof Error ? error.message : String(error)} (${BACKEND_INFO[backend].install})`;
  }
}
