import { type AnyTensor, type NDList, bindInputs as bindTensors } from '@kiln/core';
import { type TfjsDType, toTfjsDType } from '../convert/dtypes.js';
import type { TfTensorSpec } from '../model/loaded-model.js';

/** A request tensor matched to the model input it feeds. */
export interface BoundInput {
  readonly tensor: AnyTensor;
  readonly dtype: TfjsDType;
}

/**
 * A request's tensors matched to the model's inputs by core's one rule (names, then position),
 * each with the tfjs dtype it goes in as: tfjs holds fewer element types than Kiln, and
 * anything else is refused here, before tfjs sees the data.
 */
export function tfjsInputs(inputs: readonly TfTensorSpec[], list: NDList): BoundInput[] {
  // A dtype tfjs cannot hold gets its cast advice before any other check.
  list.tensors.forEach((t, i) => toTfjsDType(t.dtype, `input ${t.name ?? inputs[i]?.name ?? i}`));
  return bindTensors(list, inputs).map((tensor) => ({
    tensor,
    dtype: toTfjsDType(tensor.dtype, `input ${tensor.name}`),
  }));
}
