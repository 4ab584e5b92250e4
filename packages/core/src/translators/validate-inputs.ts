import { KilnError, KilnErrorCode } from '../errors.js';
import type { TensorDescriptor } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { formatShape, shapeMatches } from '../tensor/shape.js';
import type { AnyTensor } from '../tensor/tensor.js';

/**
 * The one rule for matching request tensors to a model's declared inputs, used by every engine
 * (DJL's): tensors with a real name go by name; tensors without one — unnamed, or named the way
 * numpy's `np.savez(f, x)` names positional arrays (`arr_0`, `arr_1`, …) — fill the remaining
 * inputs in order. A real name that matches no input is an error. Each tensor is checked
 * against what its input declares (a model that declares no dtype or shape accepts any).
 * Returns the tensors in the model's input order, each named after its input.
 */
export function bindInputs(list: NDList, inputs: readonly TensorDescriptor[]): AnyTensor[] {
  const assigned = assignTensors(list, inputs);
  return inputs.map((descriptor, i) => {
    const tensor = assigned[i]!;
    checkInput(tensor, descriptor);
    return tensor.name === descriptor.name ? tensor : tensor.withName(descriptor.name);
  });
}

/**
 * `bindInputs` as an NDList, for translators. A model that declares no inputs at all (a
 * TorchScript module whose forward takes a container) gets the list as it is.
 */
export function validateInputs(list: NDList, inputs: readonly TensorDescriptor[]): NDList {
  if (inputs.length === 0) return list;
  return new NDList(bindInputs(list, inputs));
}

/** Names numpy gives arrays saved without a name (`np.savez(f, a, b)` → arr_0, arr_1). */
const POSITIONAL_NAME = /^arr_\d+$/;

/** Does this tensor carry a name chosen by its sender, rather than a positional placeholder? */
export function hasRealName(
  tensor: AnyTensor,
  inputs: readonly TensorDescriptor[] = [],
): tensor is AnyTensor & { name: string } {
  const name = tensor.name;
  if (name === undefined || name === '') return false;
  return !POSITIONAL_NAME.test(name) || inputs.some((d) => d.name === name);
}

function assignTensors(list: NDList, inputs: readonly TensorDescriptor[]): AnyTensor[] {
  const assigned: (AnyTensor | undefined)[] = new Array(inputs.length);
  const unnamed: AnyTensor[] = [];
  for (const tensor of list) {
    if (!hasRealName(tensor, inputs)) {
      unnamed.push(tensor);
      continue;
    }
    const index = inputs.findIndex((d) => d.name === tensor.name);
    if (index < 0) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `unknown input ${JSON.stringify(tensor.name)}; the model expects ${describeInputs(inputs)}`,
      );
    }
    if (assigned[index]) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input ${JSON.stringify(tensor.name)} was given twice`,
      );
    }
    assigned[index] = tensor;
  }

  if (unnamed.length > 0 && list.length !== inputs.length) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `the model expects ${inputs.length} input${inputs.length === 1 ? '' : 's'} (${describeInputs(inputs)}) but got ${list.length}; name the tensors or send one per input`,
    );
  }
  let next = 0;
  for (let i = 0; i < inputs.length; i++) {
    if (!assigned[i] && next < unnamed.length) assigned[i] = unnamed[next++];
  }

  const missing = inputs.filter((_, i) => !assigned[i]).map((d) => d.name);
  if (missing.length > 0) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `missing input${missing.length === 1 ? '' : 's'} ${missing.map((n) => JSON.stringify(n)).join(', ')}; the model expects ${describeInputs(inputs)}`,
      { details: { missing, expected: inputs.map((d) => d.name) } },
    );
  }
  return assigned as AnyTensor[];
}

/** Checks a tensor against what its input declares; an undeclared dtype or shape allows any. */
export function checkInput(tensor: AnyTensor, descriptor: TensorDescriptor): void {
  if (descriptor.dtype !== undefined && tensor.dtype !== descriptor.dtype) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `input ${descriptor.name} expects ${descriptor.dtype}, got ${tensor.dtype}`,
    );
  }
  if (descriptor.shape !== undefined && !shapeMatches(descriptor.shape, tensor.shape)) {
    throw new KilnError(
      KilnErrorCode.ShapeMismatch,
      `input ${descriptor.name} expects shape ${formatShape(descriptor.shape)} (-1 is any size), got ${formatShape(tensor.shape)}`,
      {
        details: {
          input: descriptor.name,
          expected: [...descriptor.shape],
          actual: [...tensor.shape],
        },
      },
    );
  }
}

/** `ids int64[-1,8]`; what a model leaves undeclared reads `any dtype` / `any shape`. */
export function describeTensorDescriptor(descriptor: TensorDescriptor): string {
  const dtype = descriptor.dtype ?? 'any dtype';
  const shape = descriptor.shape === undefined ? ', any shape' : formatShape(descriptor.shape);
  return `${descriptor.name} ${dtype}${shape}`;
}

function describeInputs(inputs: readonly TensorDescriptor[]): string {
  return inputs.map(describeTensorDescriptor).join(', ');
}
