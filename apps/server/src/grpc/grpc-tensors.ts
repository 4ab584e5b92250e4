import {
  type AnyTensor,
  KilnError,
  KilnErrorCode,
  NDList,
  decodeBinaryTensor,
  decodeV2Tensor,
  dtypeNames,
  encodeBinaryTensor,
} from '@kiln/core';
import type {
  InferInputTensor,
  InferTensorContents,
  ModelInferRequest,
  ModelInferResponse,
} from './grpc-messages.js';

/** Which InferTensorContents field carries each v2 datatype (FP16 and BF16 travel raw only). */
const CONTENTS_FIELD: Readonly<Record<string, keyof InferTensorContents>> = {
  BOOL: 'bool_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
};

const utf8 = new TextDecoder('utf-8', { fatal: true });

function invalid(message: string): KilnError {
  return new KilnError(KilnErrorCode.InvalidInput, message);
}

/**
 * The request's input tensors. Either every input travels in `raw_input_contents` (one entry
 * each, in order), or every input carries typed `contents`, as Triton requires.
 */
export function decodeInferInputs(request: ModelInferRequest): NDList {
  const raw = request.raw_input_contents;
  if (raw.length > 0 && raw.length !== request.inputs.length) {
    throw invalid(
      `raw_input_contents has ${raw.length} entries for ${request.inputs.length} inputs: send every input raw, or none`,
    );
  }
  return new NDList(
    request.inputs.map((input, i) => {
      const shape = shapeOf(input);
      if (raw.length === 0) return fromContents(input, shape);
      if (hasContents(input.contents)) {
        throw invalid(`input ${input.name} has both contents and raw_input_contents`);
      }
      return decodeBinaryTensor(input.datatype, shape, raw[i]!, input.name);
    }),
  );
}

function shapeOf(input: InferInputTensor): number[] {
  if (!input.name) throw invalid('every input needs a name');
  return input.shape.map((dim) => {
    const value = Number(dim);
    if (!Number.isSafeInteger(value) || value < 0) {
      throw invalid(`input ${input.name} has shape [${input.shape.join(', ')}]`);
    }
    return value;
  });
}

function fromContents(input: InferInputTensor, shape: number[]): AnyTensor {
  const field = CONTENTS_FIELD[input.datatype];
  if (!field) {
    if (input.datatype === 'FP16' || input.datatype === 'BF16') {
      throw invalid(`input ${input.name} is ${input.datatype}: send it in raw_input_contents`);
    }
    throw invalid(`input ${input.name} has unknown datatype ${JSON.stringify(input.datatype)}`);
  }
  const contents = input.contents;
  const values = contents?.[field] ?? [];
  if (values.length === 0 && contents) {
    const other = (Object.keys(CONTENTS_FIELD) as string[])
      .map((datatype) => CONTENTS_FIELD[datatype]!)
      .find((f) => contents[f].length > 0);
    if (other) {
      throw invalid(
        `input ${input.name} is ${input.datatype}: its elements belong in ${field}, not ${other}`,
      );
    }
  }
  const data =
    field === 'bytes_contents'
      ? (values as readonly Buffer[]).map((bytes, i) => {
          try {
            return utf8.decode(bytes);
          } catch {
            throw invalid(`input ${input.name} element ${i} is not UTF-8 text`);
          }
        })
      : values;
  return decodeV2Tensor({ name: input.name, datatype: input.datatype, shape, data });
}

function hasContents(contents: InferTensorContents | null): boolean {
  return (
    contents !== null &&
    Object.values(contents).some((values) => Array.isArray(values) && values.length > 0)
  );
}

/**
 * The response: requested outputs (all when none are named) in order, their elements in
 * `raw_output_contents` as Triton answers, numeric data viewed rather than copied.
 */
export function encodeInferResponse(
  request: ModelInferRequest,
  outputs: NDList,
  model: { name: string; version: string },
): ModelInferResponse {
  const selected =
    request.outputs.length > 0
      ? request.outputs.map(({ name }) => {
          const tensor = outputs.find(name);
          if (!tensor)
            throw invalid(`unknown output ${name} (outputs: ${outputs.names.join(', ')})`);
          return tensor;
        })
      : outputs.tensors;
  return {
    model_name: model.name,
    model_version: model.version,
    id: request.id,
    outputs: selected.map((tensor, i) => ({
      name: tensor.name ?? `output_${i}`,
      datatype: dtypeNames(tensor.dtype).v2,
      shape: [...tensor.shape],
    })),
    raw_output_contents: selected.map((tensor) => {
      const bytes = encodeBinaryTensor(tensor);
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }),
  };
}
