import {
  type DType,
  type DTypeStorage,
  KilnError,
  KilnErrorCode,
  NDList,
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

/** Tensor fields only: what crosses between threads. */
export interface WireTensor {
  readonly name: string | undefined;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: TensorData;
}

export function toWire(list: NDList): WireTensor[] {
  return list.tensors.map((t) => ({
    name: t.name,
    dtype: t.dtype,
    shape: [...t.shape],
    data: t.data,
  }));
}

export function fromWire(tensors: readonly WireTensor[]): NDList {
  return new NDList(
    tensors.map((t) => new Tensor(t.dtype, t.data as DTypeStorage[DType], t.shape, t.name)),
  );
}

/** The distinct ArrayBuffers under numeric tensors (shared memory excluded). */
export function ownBuffers(tensors: readonly WireTensor[]): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const { data } of tensors) {
    if (!Array.isArray(data) && (data as TypedArray).buffer instanceof ArrayBuffer) {
      buffers.add((data as TypedArray).buffer as ArrayBuffer);
    }
  }
  return [...buffers];
}

/**
 * Buffers that can move to another thread without a copy: whole, non-shared ArrayBuffers
 * that the tensor's view covers entirely. Anything else is copied by the structured clone.
 */
export function transferables(tensors: readonly WireTensor[]): ArrayBuffer[] {
  const seen = new Set<ArrayBuffer>();
  for (const { data } of tensors) {
    if (Array.isArray(data)) continue;
    const typed = data as TypedArray;
    const buffer = typed.buffer;
    if (
      buffer instanceof ArrayBuffer &&
      typed.byteOffset === 0 &&
      typed.byteLength === buffer.byteLength
    )
      seen.add(buffer);
  }
  return [...seen];
}
