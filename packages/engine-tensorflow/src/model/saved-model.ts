import { KilnError, KilnErrorCode } from '@kiln/core';
import { fromTfjsDType, isTfjsDType, tfjsDTypeOfTfDataType } from '../convert/dtypes.js';
import type {
  SavedModelTensorInfo,
  TfSavedModel,
  TfTensor,
  TfjsNodeApi,
} from '../runtime/tfjs-api.js';
import {
  SAVED_MODEL_SIGNATURE_OPTION,
  SAVED_MODEL_TAGS_OPTION,
  type TfModelOptions,
} from '../options.js';
import { type TfLoadedModel, type TfTensorSpec, namedFeeds, tensorSpec } from './loaded-model.js';

/**
 * A TensorFlow SavedModel through tfjs-node (only native TensorFlow can run one). The
 * MetaGraph is chosen by tags and the function by signature; inputs and outputs take the
 * signature's keys as names.
 */
export async function loadSavedModel(
  node: TfjsNodeApi | undefined,
  dir: string,
  options: Pick<TfModelOptions, 'tags' | 'signature'>,
  backend: string,
): Promise<TfLoadedModel> {
  if (node === undefined) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `${dir} is a TensorFlow SavedModel, which only native TensorFlow can run, but this engine runs on the ${backend} backend: ` +
        'install @tensorflow/tfjs-node (or @tensorflow/tfjs-node-gpu), or convert the model to TF.js with ' +
        '`tensorflowjs_converter --input_format=tf_saved_model`',
    );
  }
  const tags = [...options.tags];
  const signatureName = options.signature;
  const metaGraphs = await node.getMetaGraphsFromSavedModel(dir);
  const metaGraph = metaGraphs.find((m) => sameSet(m.tags, tags));
  if (metaGraph === undefined) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `SavedModel ${dir} has no MetaGraph tagged ${tags.join(',')} (it has: ${metaGraphs.map((m) => m.tags.join(',')).join('; ') || 'none'}); choose one with option.${SAVED_MODEL_TAGS_OPTION}`,
    );
  }
  const signature = metaGraph.signatureDefs[signatureName];
  if (signature === undefined) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `SavedModel ${dir} has no signature ${signatureName} under tags ${tags.join(',')} (it has: ${Object.keys(metaGraph.signatureDefs).join(', ') || 'none'}); choose one with option.${SAVED_MODEL_SIGNATURE_OPTION}`,
    );
  }
  const inputs = Object.entries(signature.inputs).map(([key, info]) =>
    savedModelSpec(key, info, 'input'),
  );
  const outputs = Object.entries(signature.outputs).map(([key, info]) =>
    savedModelSpec(key, info, 'output'),
  );
  const model = await node.loadSavedModel(dir, tags, signatureName);
  return new SavedModelAdapter(model, inputs, outputs, {
    format: 'saved-model',
    dir,
    tags,
    signature: signatureName,
  });
}

class SavedModelAdapter implements TfLoadedModel {
  readonly format = 'saved-model';
  readonly asynchronous = false;

  constructor(
    private readonly model: TfSavedModel,
    readonly inputs: readonly TfTensorSpec[],
    readonly outputs: readonly TfTensorSpec[],
    readonly facts: Readonly<Record<string, unknown>>,
  ) {}

  executeSync(feeds: readonly TfTensor[]): TfTensor[] {
    // With a named map, TFSavedModel returns a map keyed by the signature's output keys.
    const result = this.model.predict(namedFeeds(this.inputs, feeds)) as Record<string, TfTensor>;
    return this.outputs.map((spec) => {
      const tensor = result[spec.name];
      if (tensor === undefined) throw new Error(`the SavedModel returned no output ${spec.name}`);
      return tensor;
    });
  }

  executeAsync(feeds: readonly TfTensor[]): Promise<TfTensor[]> {
    return Promise.resolve(this.executeSync(feeds));
  }

  dispose(): void {
    this.model.dispose();
  }
}

function savedModelSpec(
  key: string,
  info: SavedModelTensorInfo,
  role: 'input' | 'output',
): TfTensorSpec {
  // tfjs-node reports tfjs dtypes; the DT_ names are accepted too.
  const dtype = isTfjsDType(info.dtype) ? info.dtype : tfjsDTypeOfTfDataType(info.dtype);
  return tensorSpec(key, fromTfjsDType(dtype, `${role} ${key}`), info.shape?.map(dimSize));
}

/** A dimension as a number; some tfjs-node releases hand out protobuf Dim messages. */
function dimSize(dim: unknown): number {
  if (typeof dim === 'number') return dim;
  const size = (dim as { getSize?: () => unknown } | null)?.getSize?.();
  return size === undefined ? -1 : Number(size);
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((tag) => b.includes(tag));
}
