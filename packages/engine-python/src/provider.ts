import {
  ENGINE_SPECIFICATION_VERSION,
  KilnError,
  KilnErrorCode,
  type EngineProvider,
} from '@kiln/core';
import { ENGINE_NAME } from './engine-name.js';
import { PYTHON_OPTIONS } from './option-declarations.js';
import { defaultPythonExecutable } from './options.js';

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
    // Its workers serve requests (DJL's Input/Output), not tensors; with option.rolling_batch
    // they step a handler that decodes text (PythonModel.newStepDecoder).
    workerKinds: ['serve', 'step'],
    options: PYTHON_OPTIONS,
    // The handler gets every key among its properties: none is unknown.
    passesSettingsToModel: true,
    recognizes: (fileNames) => fileNames.includes('model.py'),
    // The engine's modules are imported here, when a model first needs it.
    load: async () => {
      const { PythonEngine } = await import('./python-engine.js');
      const executable = options.pythonExecutable ?? defaultPythonExecutable();
      try {
        return new PythonEngine(executable);
      } catch (error) {
        throw new KilnError(KilnErrorCode.EngineUnavailable, `cannot run ${executable}`, {
          cause: error,
        });
      }
    },
  };
}

export const provider: EngineProvider = createPythonEngine();
