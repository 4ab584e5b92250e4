import type { TensorDescriptor } from '@kiln/core';

/** Every input declares its shape and its first dimension is dynamic: requests stack there. */
export function hasBatchAxis(inputs: readonly TensorDescriptor[]): boolean {
  return (
    inputs.length > 0 &&
    inputs.every(
      (input) => input.shape !== undefined && input.shape.length > 0 && input.shape[0] === -1,
    )
  );
}
