import {
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  type TensorDescriptor,
  bindInputs,
  isNumericDType,
} from '@kiln/core';
import type { DlrInputTensor, DlrOutputTensor } from '@kiln/dlr-native';
import { dtypeOfTvmType } from './dlr-dtypes.js';

/**
 * The request's tensors as DLR inputs, bound and checked by core's one rule (names, then
 * position). DLR takes numeric tensors only.
 */
export function dlrInputs(inputs: readonly TensorDescriptor[], list: NDList): DlrInputTensor[] {
  return bindInputs(list, inputs).map((tensor) => {
    if (!isNumericDType(tensor.dtype)) {
      throw new KilnError(
        KilnErrorCode.UnsupportedDType,
        `input ${JSON.stringify(tensor.name)} is ${tensor.dtype}: DLR takes numeric tensors`,
      );
    }
    return { name: tensor.name!, type: tensor.dtype, shape: tensor.shape, data: tensor.bytes() };
  });
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
