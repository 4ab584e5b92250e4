import {
  KilnError,
  KilnErrorCode,
  NDList,
  type AnyTensor,
  Tensor,
  type TensorDescriptor,
  formatShape,
  isNumericDType,
  shapeMatches,
} from '@kiln/core';
import type { DlrInputTensor, DlrOutputTensor } from '@kiln/dlr-native';
import { dtypeOfTvmType } from './dlr-dtypes.js';

/**
 * Binds an NDList to the model's inputs: by name when its tensors are named, else by position.
 * Every input must be given, with the model's dtype and a shape its declared one allows.
 * Throws INVALID_INPUT, UNSUPPORTED_DTYPE or SHAPE_MISMATCH.
 */
export function bindInputs(inputs: readonly TensorDescriptor[], list: NDList): DlrInputTensor[] {
  const named = list.tensors.every((t) => t.name !== undefined);
  if (named) {
    const unknown = list.tensors
      .filter((t) => !inputs.some((d) => d.name === t.name))
      .map((t) => t.name);
    if (unknown.length > 0) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `the model has no input named ${unknown.map((n) => JSON.stringify(n)).join(', ')} (inputs: ${inputs.map((d) => d.name).join(', ') || 'none'})`,
      );
    }
  } else if (list.length !== inputs.length) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `the model takes ${inputs.length} inputs, got ${list.length} unnamed tensors`,
    );
  }
  return inputs.map((descriptor, index) => {
    const tensor = named ? list.find(descriptor.name) : list.tensors[index];
    if (!tensor)
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `missing input ${JSON.stringify(descriptor.name)}`,
      );
    return toDlrInput(descriptor, tensor);
  });
}

function toDlrInput(descriptor: TensorDescriptor, tensor: AnyTensor): DlrInputTensor {
  if (tensor.dtype !== descriptor.dtype || !isNumericDType(tensor.dtype)) {
    throw new KilnError(
      KilnErrorCode.UnsupportedDType,
      `input ${JSON.stringify(descriptor.name)} is ${descriptor.dtype}, got ${tensor.dtype}`,
    );
  }
  if (!shapeMatches(descriptor.shape, tensor.shape)) {
    throw new KilnError(
      KilnErrorCode.ShapeMismatch,
      `input ${JSON.stringify(descriptor.name)} needs shape ${formatShape(descriptor.shape)}, got ${formatShape(tensor.shape)}`,
    );
  }
  return {
    name: descriptor.name,
    type: descriptor.dtype,
    shape: tensor.shape,
    data: tensor.bytes(),
  };
}

/** DLR's outputs as named tensors over the buffers the addon returned (no copy). */
export function outputList(outputs: readonly DlrOutputTensor[]): NDList {
  return new NDList(
    outputs.map((o) =>
      Tensor.fromBytes(
        dtypeOfTvmType(o.type, `output ${JSON.stringify(o.name)}`),
        new Uint8Array(o.data),
        o.shape,
        o.name,
      ),
    ),
  );
}
