import type { TensorDescriptor } from '@kiln/core';
import type { TfNamedTensorMap, TfTensor } from '../runtime/tfjs-api.js';

export type TfModelFormat = 'graph-model' | 'layers-model' | 'saved-model';

/** A model input or output; no shape when the model does not say its rank. */
export type TfTensorSpec = TensorDescriptor;

/** A model loaded into this thread's tfjs runtime, behind one interface for every format. */
export interface TfLoadedModel {
  readonly format: TfModelFormat;
  readonly inputs: readonly TfTensorSpec[];
  readonly outputs: readonly TfTensorSpec[];
  /** What the model reports about itself (file, signature, tags…). */
  readonly facts: Readonly<Record<string, unknown>>;
  /** True once the model is known to need `executeAsync` (graphs with control flow). */
  readonly asynchronous: boolean;
  /**
   * Runs the model on one tensor per input, in `inputs` order; returns the outputs in
   * `outputs` order. Throws AsyncExecutionRequired (after setting `asynchronous`) when the
   * graph turns out to need the asynchronous path.
   */
  executeSync(feeds: readonly TfTensor[]): TfTensor[];
  executeAsync(feeds: readonly TfTensor[]): Promise<TfTensor[]>;
  dispose(): void;
}

/** The graph holds ops that tfjs runs only asynchronously; nothing was computed. */
export class AsyncExecutionRequired extends Error {
  constructor() {
    super('the model needs asynchronous execution');
    this.name = 'AsyncExecutionRequired';
  }
}

/** A spec for a shape tfjs reports with null (or missing) for unknown dimensions. */
export function tensorSpec(
  name: string,
  dtype: TensorDescriptor['dtype'],
  shape: readonly (number | null | undefined)[] | undefined,
): TfTensorSpec {
  const declared = {
    name,
    ...(dtype === undefined ? {} : { dtype }),
  };
  if (shape === undefined) return declared;
  return { ...declared, shape: shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) };
}

/** Feeds keyed by input name, for the APIs that take a named map. */
export function namedFeeds(
  inputs: readonly TfTensorSpec[],
  feeds: readonly TfTensor[],
): TfNamedTensorMap {
  return Object.fromEntries(inputs.map((spec, i) => [spec.name, feeds[i]!]));
}

/** One tensor or a list, as tfjs models return them, as a list. */
export function tensorList(result: TfTensor | TfTensor[]): TfTensor[] {
  return Array.isArray(result) ? result : [result];
}
