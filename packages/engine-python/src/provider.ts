import {
  ENGINE_SPECIFICATION_VERSION,
  KilnError,
  KilnErrorCode,
  type EngineProvider,
} from '@kiln/core';
import { defaultPythonExecutable } from './options.js';
import { PythonEngine } from './python-engine.js';
import { ENGINE_NAME } from './python-model.js';

export interface PythonEngineOptions {
  /** The interpreter used to probe the engine; models may name their own (option.pythonExecutable). */
  readonly pythonExecutable?: string;
  readonly rank?: number;
}

export function createPythonEngine(options: PythonEngineOptions = {}): EngineProvider {
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name: ENGINE_NAME,
    rank: options.rank ?? 1,
    // Every context is its own Python process: workers share the model on the main thread.
    execution: 'async',
    recognizes: (fileNames) => fileNames.includes('model.py'),
    load: () => {
      const executable = options.pythonExecutable ?? defaultPythonExecutable();
      try {
        return Promise.resolve(new PythonEngine(executable));
      } catch (error) {
        return Promise.reject(
          new KilnError(KilnErrorCode.EngineUnavailable, `cannot run ${executable}`, {
            cause: error,
          }),
        );
      }
    },
  };
}

export const provider: EngineProvider = createPythonEngine();
