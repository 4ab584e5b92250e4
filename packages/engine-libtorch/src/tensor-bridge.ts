import {
  type AnyTensor,
  KilnError,
  KilnErrorCode,
  Tensor,
  type TypedArray,
  isDType,
} from '@kiln/core';
import type { HostTensor } from '@kiln/libtorch-native';

/** A core tensor as the addon takes it (no copy here; the addon copies on the JS thread). */
export function toHostTensor(tensor: AnyTensor, what = tensor.name ?? 'tensor'): HostTensor {
  if (tensor.dtype === 'string') {
    throw new KilnError(
      KilnErrorCode.UnsupportedDType,
      `${what} is a string tensor; LibTorch has no string tensors (tokenize in the translator)`,
    );
  }
  return tensor as Tensor<Exclude<typeof tensor.dtype, 'string'>>;
}

/** A tensor from the addon as a core tensor over the same memory. */
export function fromHostTensor(host: HostTensor, name?: string): AnyTensor {
  if (!isDType(host.dtype)) {
    throw new KilnError(
      KilnErrorCode.UnsupportedDType,
      `LibTorch returned a tensor of unknown dtype ${host.dtype}`,
    );
  }
  return new Tensor(host.dtype, host.data as TypedArray, host.shape, name);
}

export function isHostTensor(value: unknown): value is HostTensor {
  return (
    typeof value === 'object' &&
    value !== null &&
    ArrayBuffer.isView((value as HostTensor).data) &&
    typeof (value as HostTensor).dtype === 'string' &&
    Array.isArray((value as HostTensor).shape)
  );
}
