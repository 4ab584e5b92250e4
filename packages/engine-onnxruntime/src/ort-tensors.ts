import {
  type DType,
  type DTypeStorage,
  KilnError,
  KilnErrorCode,
  type NumericDType,
  Tensor,
  type TensorData,
  type TensorDescriptor,
  type TypedArray,
  isDType,
  typedArrayConstructor,
} from '@kiln/core';
import type { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import type { OrtModule } from './ort-loader.js';

/** ONNX Runtime's JS type names that Kiln shares; int4/uint4 have no Kiln dtype. */
export function fromOrtType(type: string, what: string): DType {
  if (type !== 'bfloat16' && isDType(type)) return type;
  throw new KilnError(
    KilnErrorCode.UnsupportedDType,
    `${what} has type ${type}, which onnxruntime-node cannot exchange with Kiln`,
  );
}

/** A model input/output as Kiln describes it: symbolic or unknown dimensions become -1. */
export function toDescriptor(
  metadata: InferenceSession.ValueMetadata,
  what: string,
  withoutShape: ReadonlySet<string> = new Set(),
): TensorDescriptor {
  if (!metadata.isTensor) {
    throw new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `${what} ${metadata.name} is not a tensor (sequences and maps are not supported)`,
    );
  }
  return {
    name: metadata.name,
    dtype: fromOrtType(metadata.type, `${what} ${metadata.name}`),
    ...(withoutShape.has(metadata.name)
      ? {}
      : { shape: metadata.shape.map((dim) => (typeof dim === 'number' && dim >= 0 ? dim : -1)) }),
  };
}

/** A Kiln tensor as an ORT tensor, sharing its memory. */
export function toOrtTensor(ort: OrtModule, tensor: Tensor): OrtTensor {
  return new ort.Tensor(tensor.dtype as never, tensor.data as never, tensor.shape);
}

/** An ORT output as a Kiln tensor named after its output. */
export function fromOrtTensor(name: string, value: OrtTensor): Tensor {
  const dtype = fromOrtType(value.type, `output ${name}`);
  return new Tensor(
    dtype,
    storageFor(dtype, value.data as TensorData) as DTypeStorage[DType],
    value.dims,
    name,
  );
}

/**
 * ORT hands float16 back as Uint16Array today and may hand Float16Array later; Kiln keeps
 * raw bits in a Uint16Array either way.
 */
function storageFor(dtype: DType, data: TensorData): TensorData {
  if (dtype === 'string' || data instanceof typedArrayConstructor(dtype as NumericDType))
    return data;
  const typed = data as TypedArray;
  return new (typedArrayConstructor(dtype as NumericDType))(
    typed.buffer,
    typed.byteOffset,
    typed.byteLength / 2,
  );
}
