import { KilnError, KilnErrorCode } from '../errors.js';
import type { TensorDescriptor } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { formatShape, shapeMatches } from '../tensor/shape.js';
import type { AnyTensor } from '../tensor/tensor.js';

/**
 * Matches request tensors to a model's declared inputs. Named tensors go by name; unnamed ones
 * fill the remaining inputs in order, which needs exactly one tensor per input. Returns the
 * tensors in the model's input order, each named after its input. A model that declares no
 * inputs (TorchScript reports none) gets the list as it is.
 */
export function validateInputs(list: NDList, inputs: readonly TensorDescriptor[]): NDList {
  if (inputs.length === 0) return list;
  const assigned = assignTensors(list, inputs);
  return new NDList(
    inputs.map((descriptor, i) => {
      const tensor = assigned[i]!;
      checkTensor(tensor, descriptor);
      return tensor.name === descriptor.name ? tensor : tensor.withName(descriptor.name);
    }),
  );
}

function assignTensors(list: NDList, inputs: readonly TensorDescriptor[]): AnyTensor[] {
  const expected = describeNames(inputs);
  const assigned: (AnyTensor | undefined)[] = new Array(inputs.length);
  const unnamed: AnyTensor[] = [];
  for (const tensor of list) {
    if (tensor.name === undefined || tensor.name === '') {
      unnamed.push(tensor);
      continue;
    }
    const index = inputs.findIndex((d) => d.name === tensor.name);
    if (index < 0) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `unknown input ${JSON.stringify(tensor.name)}; the model expects ${expected}`,
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
      `the model expects ${inputs.length} input${inputs.length === 1 ? '' : 's'} (${expected}) but got ${list.length}; name the tensors or send one per input`,
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
      `missing input${missing.length === 1 ? '' : 's'} ${missing.map((n) => JSON.stringify(n)).join(', ')}; the model expects ${expected}`,
      { details: { missing, expected: inputs.map((d) => d.name) } },
    );
  }
  return assigned as AnyTensor[];
}

function checkTensor(tensor: AnyTensor, descriptor: TensorDescriptor): void {
  if (tensor.dtype !== descriptor.dtype) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `input ${descriptor.name} expects ${descriptor.dtype}, got ${tensor.dtype}`,
    );
  }
  if (!shapeMatches(descriptor.shape, tensor.shape)) {
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

function describeNames(inputs: readonly TensorDescriptor[]): string {
  return inputs.map((d) => `${d.name} ${d.dtype}${formatShape(d.shape)}`).join(', ');
}
