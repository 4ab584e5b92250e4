import {
  KilnError,
  KilnErrorCode,
  type NDList,
  type Tensor,
  type TensorDescriptor,
  formatShape,
  shapeMatches,
} from '@kiln/core';

/**
 * Matches an input list to the model's inputs, in the model's order: tensors named like an
 * input bind to it, the rest fill the remaining inputs in order. Checks dtype and shape
 * here, so that ONNX Runtime never sees a tensor it would reject less clearly (or crash on).
 */
export function bindInputs(list: NDList, inputs: readonly TensorDescriptor[]): Tensor[] {
  const expected = inputs.map((d) => `${d.name}: ${d.dtype}${formatShape(d.shape)}`).join(', ');
  if (list.length !== inputs.length) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `the model takes ${inputs.length} input(s) (${expected}) but got ${list.length}`,
    );
  }
  const bound: (Tensor | undefined)[] = new Array(inputs.length);
  const unmatched: Tensor[] = [];
  for (const tensor of list.tensors) {
    const slot = tensor.name === undefined ? -1 : inputs.findIndex((d) => d.name === tensor.name);
    if (slot < 0) unmatched.push(tensor);
    else if (bound[slot])
      throw new KilnError(KilnErrorCode.InvalidInput, `input ${tensor.name} was given twice`);
    else bound[slot] = tensor;
  }
  for (let i = 0; i < bound.length; i++) bound[i] ??= unmatched.shift();

  return inputs.map((descriptor, i) => {
    const tensor = bound[i]!;
    if (tensor.dtype !== descriptor.dtype) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input ${descriptor.name} must be ${descriptor.dtype}, got ${tensor.dtype}`,
      );
    }
    if (!shapeMatches(descriptor.shape, tensor.shape)) {
      throw new KilnError(
        KilnErrorCode.ShapeMismatch,
        `input ${descriptor.name} must have shape ${formatShape(descriptor.shape)} (-1 = any), got ${formatShape(tensor.shape)}`,
      );
    }
    return tensor;
  });
}
