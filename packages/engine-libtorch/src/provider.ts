import { ENGINE_SPECIFICATION_VERSION, type EngineProvider } from '@kiln/core';
import { isTorchScriptFile } from './model-file.js';
import { libtorch } from './native.js';
import { type LibTorchEngineOptions, engineOptionsFromEnv } from './options.js';
import { PtEngine } from './pt-engine.js';
import { ENGINE_NAME } from './pt-model.js';

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
    recognizes: (fileNames) => fileNames.some(isTorchScriptFile),
    load: async () =>
      new PtEngine(libtorch(), { ...engineOptionsFromEnv(), ...definedOnly(options) }),
  };
}

/** The PyTorch engine with default settings. */
export const provider: EngineProvider = createLibTorchEngine();

function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(
    Object.entries(options).filter(([, v]) => v !== undefined),
  ) as Partial<T>;
}
