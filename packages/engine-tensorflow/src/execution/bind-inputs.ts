import {
  type AnyTensor,
  KilnError,
  KilnErrorCode,
  type NDList,
  formatShape,
  shapeMatches,
} from '@kiln/core';
import { type TfjsDType, toTfjsDType } from '../convert/dtypes.js';
import type { TfTensorSpec } from '../model/loaded-model.js';

/** A request tensor matched to the model input it feeds. */
export interface BoundInput {
  readonly tensor: AnyTensor;
  readonly dtype: TfjsDType;
}

/**
 * Matches a request's tensors to the model's inputs, in input order: named tensors by name,
 * unnamed ones by position. Every mismatch is refused here, before tfjs sees the data, with
 * an error that names the input.
 */
export function bindInputs(
  modelName: string,
  inputs: readonly TfTensorSpec[],
  list: NDList,
): BoundInput[] {
  if (list.length !== inputs.length) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `model ${modelName} takes ${inputs.length} input(s) (${inputs.map((i) => i.name).join(', ')}); the request has ${list.length}`,
    );
  }
  const byName = new Map<string, AnyTensor>();
  list.tensors.forEach((tensor, i) => {
    const name = tensor.name ?? inputs[i]!.name;
    if (!inputs.some((spec) => spec.name === name)) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `model ${modelName} has no input named ${JSON.stringify(name)} (inputs: ${inputs.map((s) => s.name).join(', ')})`,
      );
    }
    if (byName.has(name)) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input ${JSON.stringify(name)} is given twice`,
      );
    }
    byName.set(name, tensor);
  });
  return inputs.map((spec) => {
    const tensor = byName.get(spec.name)!;
    const dtype = toTfjsDType(tensor.dtype, `input ${spec.name}`);
    if (dtype !== spec.dtype) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input ${spec.name} must be ${spec.dtype}, got ${tensor.dtype}`,
      );
    }
    if (spec.shapeKnown && !shapeMatches(spec.shape, tensor.shape)) {
      throw new KilnError(
        KilnErrorCode.ShapeMismatch,
        `input ${spec.name} must have shape ${formatShape(spec.shape)} (-1: any size), got ${formatShape(tensor.shape)}`,
      );
    }
    return { tensor, dtype };
  });
}
