import { fromTfjsDType } from '../convert/dtypes.js';
import type { TfApi, TfModelArtifacts, TfTensor } from '../runtime/tfjs-api.js';
import { type TfLoadedModel, type TfTensorSpec, tensorList, tensorSpec } from './loaded-model.js';

type LayersModel = Awaited<ReturnType<TfApi['loadLayersModel']>>;

/** A TF.js layers model (Keras-style topology); inputs and outputs are named by their layers. */
export async function loadLayersModel(
  tf: TfApi,
  file: string,
  artifacts: TfModelArtifacts,
): Promise<TfLoadedModel> {
  const model = await tf.loadLayersModel({ load: () => Promise.resolve(artifacts) });
  const inputs = model.inputs.map((t, i) => {
    const name = model.inputNames[i]!;
    return tensorSpec(name, fromTfjsDType(t.dtype, `input ${name}`), t.shape);
  });
  const outputs = model.outputs.map((t, i) => {
    const name = model.outputNames[i]!;
    return tensorSpec(name, fromTfjsDType(t.dtype, `output ${name}`), t.shape);
  });
  return new LayersModelAdapter(model, inputs, outputs, {
    format: 'layers-model',
    file,
    modelName: model.name,
    layers: model.layers.length,
    generatedBy: artifacts.generatedBy,
    convertedBy: artifacts.convertedBy,
  });
}

class LayersModelAdapter implements TfLoadedModel {
  readonly format = 'layers-model';
  readonly asynchronous = false;
  /** Output tensors by their symbolic names, which `execute` looks them up by. */
  private readonly fetches: string[];

  constructor(
    private readonly model: LayersModel,
    readonly inputs: readonly TfTensorSpec[],
    readonly outputs: readonly TfTensorSpec[],
    readonly facts: Readonly<Record<string, unknown>>,
  ) {
    this.fetches = model.outputs.map((t) => t.name);
  }

  executeSync(feeds: readonly TfTensor[]): TfTensor[] {
    // `execute` runs the whole input as one batch; `predict` would slice it into batches of 32.
    return tensorList(this.model.execute([...feeds], this.fetches));
  }

  executeAsync(feeds: readonly TfTensor[]): Promise<TfTensor[]> {
    return Promise.resolve(this.executeSync(feeds));
  }

  dispose(): void {
    this.model.dispose();
  }
}
