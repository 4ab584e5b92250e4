import { ENGINE_SPECIFICATION_VERSION, type EngineProvider } from '@kiln/core';
import { decoderFolderSettings } from './decoder-folder.js';
import { ENGINE_NAME } from './engine-name.js';
import { SESSION_OPTIONS } from './options.js';
import type { OrtModelSettings } from './ort-model.js';

export interface OnnxRuntimeEngineOptions extends OrtModelSettings {
  /** Preference when no engine is named; 10 by default. */
  readonly rank?: number;
}

/** A provider for the OnnxRuntime engine; onnxruntime-node is imported only by `load()`. */
export function createOnnxRuntimeEngine(options: OnnxRuntimeEngineOptions = {}): EngineProvider {
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name: ENGINE_NAME,
    rank: options.rank ?? 10,
    // onnxruntime-node's run blocks its thread: the worker pool gives each worker one.
    execution: 'blocking',
    options: SESSION_OPTIONS,
    // Tensor models run forwards; KV-cache decoders also run steps (OrtModel.newStepDecoder).
    workerKinds: ['forward', 'step'],
    // A transformers.js decoder folder is text generation without a serving.properties.
    impliedSettings: decoderFolderSettings,
    recognizes: (fileNames) => fileNames.some((f) => f.toLowerCase().endsWith('.onnx')),
    // The engine's modules are imported here, when a model first needs it.
    load: async () => {
      const [{ OrtEngine }, { loadOrt }] = await Promise.all([
        import('./ort-engine.js'),
        import('./ort-loader.js'),
      ]);
      return new OrtEngine(await loadOrt(), options);
    },
  };
}

/** The OnnxRuntime engine with default settings. */
export const provider: EngineProvider = createOnnxRuntimeEngine();
