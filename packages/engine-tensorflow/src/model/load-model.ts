import { type Device, KilnError, KilnErrorCode } from '@kiln/core';
import { loadArtifacts } from '../io/file-system-handler.js';
import { locateModel } from '../io/locate-model.js';
import type { TfRuntime } from '../runtime/resolve-runtime.js';
import type { TfModelArtifacts } from '../runtime/tfjs-api.js';
import { readTfModelOptions } from '../options.js';
import { loadGraphModel } from './graph-model.js';
import { loadLayersModel } from './layers-model.js';
import type { TfLoadedModel } from './loaded-model.js';
import { loadSavedModel } from './saved-model.js';

/** What it takes to load a model: plain data, so it can be sent to a worker thread. */
export interface TfModelSpec {
  readonly name: string;
  readonly modelDir: string;
  readonly modelFile?: string | undefined;
  readonly device: Device;
  /** `option.*` of serving.properties, prefix removed. */
  readonly options: Readonly<Record<string, string>>;
}

/** Loads a TF.js graph or layers model, or a SavedModel, into this thread's runtime. */
export async function loadTfModel(runtime: TfRuntime, spec: TfModelSpec): Promise<TfLoadedModel> {
  const options = readTfModelOptions(spec.options);
  const located = await locateModel(spec.modelDir, spec.modelFile, {
    name: spec.name,
    modelName: options.modelName,
  });
  try {
    if (located.kind === 'saved-model') {
      return await loadSavedModel(runtime.node, located.dir, options, runtime.facts.backend);
    }
    const artifacts = await loadArtifacts(runtime.tf, located.file);
    return tfjsFormat(artifacts) === 'graph-model'
      ? await loadGraphModel(runtime.tf, located.file, artifacts)
      : await loadLayersModel(runtime.tf, located.file, artifacts);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.ModelLoadFailed,
      `cannot load TensorFlow model ${spec.name}`,
    );
  }
}

/** `format` as the converter writes it; older files are told apart by their topology. */
function tfjsFormat(artifacts: TfModelArtifacts): 'graph-model' | 'layers-model' {
  if (artifacts.format === 'graph-model' || artifacts.format === 'layers-model')
    return artifacts.format;
  return Array.isArray((artifacts.modelTopology as { node?: unknown } | undefined)?.node)
    ? 'graph-model'
    : 'layers-model';
}
