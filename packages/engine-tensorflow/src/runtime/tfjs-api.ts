import type * as Tfjs from '@tensorflow/tfjs';

/** The tfjs namespace, whichever package provided it (@tensorflow/tfjs or tfjs-node). */
export type TfApi = typeof Tfjs;
export type TfTensor = Tfjs.Tensor;
export type TfNamedTensorMap = Tfjs.NamedTensorMap;
export type TfModelArtifacts = Tfjs.io.ModelArtifacts;
export type TfModelJSON = Tfjs.io.ModelJSON;

/** One input or output of a SavedModel signature, as tfjs-node's getMetaGraphsFromSavedModel reports it. */
export interface SavedModelTensorInfo {
  readonly name: string;
  readonly dtype: string;
  /** Dimensions; numbers, or the protobuf Dim messages some tfjs-node releases return. */
  readonly shape?: readonly unknown[];
}

export interface SavedModelSignature {
  readonly inputs: Readonly<Record<string, SavedModelTensorInfo>>;
  readonly outputs: Readonly<Record<string, SavedModelTensorInfo>>;
}

export interface SavedModelMetaGraph {
  readonly tags: readonly string[];
  readonly signatureDefs: Readonly<Record<string, SavedModelSignature>>;
}

/** tfjs-node's TFSavedModel: runs one signature of a loaded SavedModel. */
export interface TfSavedModel {
  predict(inputs: TfNamedTensorMap): TfTensor | TfTensor[] | TfNamedTensorMap;
  dispose(): void;
}

/**
 * The part of tfjs-node's `tf.node` namespace Kiln uses, written against its documented API
 * (tfjs-node is an optional peer, so its own types may be absent).
 */
export interface TfjsNodeApi {
  loadSavedModel(path: string, tags?: string[], signature?: string): Promise<TfSavedModel>;
  getMetaGraphsFromSavedModel(path: string): Promise<SavedModelMetaGraph[]>;
}

/** tf.memory(), the fields that do not depend on the backend. */
export interface TfMemoryInfo {
  readonly numTensors: number;
  readonly numDataBuffers: number;
  readonly numBytes: number;
}
