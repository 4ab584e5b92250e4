import { ENGINE_SPECIFICATION_VERSION, type EngineProvider } from '@kiln/core';
import { ENGINE_NAME } from './engine-name.js';
import { isTorchScriptFile } from './model-file.js';
import { type LibTorchEngineOptions, PT_OPTIONS, engineOptionsFromEnv } from './options.js';

/**
 * A provider for the PyTorch engine. The addon is loaded by `load()`, not before. Options not
 * given here come from KILN_PYTORCH_* environment variables (KILN_PYTORCH_NUM_THREADS…).
 */
export function createLibTorchEngine(options: LibTorchEngineOptions = {}): EngineProvider {
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name: ENGINE_NAME,
    rank: options.rank ?? 9,
    // Forwards run on the addon's own threads and every context shares one loaded module.
    execution: 'async',
    options: PT_OPTIONS,
    recognizes: (fileNames) => fileNames.some(isTorchScriptFile),
    // The engine's modules (and the addon's binding) are imported when a model first needs it.
    load: async () => {
      const [{ libtorch }, { PtEngine }] = await Promise.all([
        import('./native.js'),
        import('./pt-engine.js'),
      ]);
      return new PtEngine(libtorch(), { ...engineOptionsFromEnv(), ...definedOnly(options) });
    },
  };
}

/** The PyTorch engine with default settings. */
export const provider: EngineProvider = createLibTorchEngine();

function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(options).filter(([, v]) => v !== undefined),
  ) as Partial<T>;
}
