import { KilnError, KilnErrorCode } from '../errors.js';
import { dtypeNames } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import type { AnyTensor } from '../tensor/tensor.js';
import { decodeBinaryTensor, encodeBinaryTensor } from './v2-binary.js';
import { decodeV2Tensor, encodeV2Tensor } from './v2-json.js';

/** The binary-data extension's header: the byte length of the JSON part of a body. */
export const V2_BINARY_HEADER = 'inference-header-content-length';

interface V2RequestOutput {
  name: string;
  parameters?: { binary_data?: boolean };
}

/** A parsed v2 infer request: tensors plus what the reply should hold. */
export interface V2InferRequest {
  readonly id: string | undefined;
  readonly inputs: NDList;
  /** Requested output names, in order; undefined = all. */
  readonly outputs: readonly V2RequestOutput[] | undefined;
  readonly binaryOutputByDefault: boolean;
}

/**
 * Parses a v2 infer body: JSON, or with the binary-data extension (the JSON header's length
 * in `Inference-Header-Content-Length`, then each binary input's bytes in order).
 */
export function parseV2Request(body: Uint8Array, headerLength: string | undefined): V2InferRequest {
  let jsonEnd = body.byteLength;
  if (headerLength !== undefined) {
    jsonEnd = Number(headerLength);
    if (!Number.isSafeInteger(jsonEnd) || jsonEnd < 0 || jsonEnd > body.byteLength) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `Inference-Header-Content-Length ${headerLength} does not fit a ${body.byteLength}-byte body`,
      );
    }
  }
  let request: unknown;
  try {
    request = JSON.parse(new TextDecoder().decode(body.subarray(0, jsonEnd)));
  } catch {
    throw new KilnError(KilnErrorCode.InvalidInput, 'request JSON is malformed');
  }
  if (
    typeof request !== 'object' ||
    request === null ||
    !Array.isArray((request as { inputs?: unknown }).inputs)
  ) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      'request must be an object with an "inputs" array',
    );
  }
  const r = request as {
    id?: unknown;
    inputs: unknown[];
    outputs?: unknown;
    parameters?: { binary_data_output?: unknown };
  };
  checkParameters(r.parameters, '"parameters"', 'binary_data_output');
  let offset = jsonEnd;
  const tensors: AnyTensor[] = r.inputs.map((input, i) => {
    const spec = input as {
      name?: unknown;
      shape?: unknown;
      datatype?: unknown;
      parameters?: { binary_data_size?: unknown };
    };
    const size = spec?.parameters?.binary_data_size;
    if (size === undefined) return decodeV2Tensor(input);
    if (
      typeof size !== 'number' ||
      !Number.isSafeInteger(size) ||
      size < 0 ||
      offset + size > body.byteLength
    ) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `input ${i} declares binary_data_size ${String(size)} beyond the body`,
      );
    }
    if (
      typeof spec.name !== 'string' ||
      typeof spec.datatype !== 'string' ||
      !Array.isArray(spec.shape)
    ) {
      throw new KilnError(KilnErrorCode.InvalidInput, `input ${i} needs name, datatype and shape`);
    }
    const tensor = decodeBinaryTensor(
      spec.datatype,
      spec.shape as number[],
      body.subarray(offset, offset + size),
      spec.name,
    );
    offset += size;
    return tensor;
  });
  if (offset !== body.byteLength) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `${body.byteLength - offset} bytes of binary data belong to no input`,
    );
  }
  if (r.id !== undefined && typeof r.id !== 'string')
    throw new KilnError(KilnErrorCode.InvalidInput, '"id" must be a string');
  if (
    r.outputs !== undefined &&
    (!Array.isArray(r.outputs) ||
      r.outputs.some((o) => typeof (o as { name?: unknown })?.name !== 'string'))
  ) {
    throw new KilnError(KilnErrorCode.InvalidInput, '"outputs" must be a list of {"name": ...}');
  }
  (r.outputs as { parameters?: unknown }[] | undefined)?.forEach((o, i) =>
    checkParameters(o.parameters, `output ${i} "parameters"`, 'binary_data'),
  );
  return {
    id: r.id,
    inputs: new NDList(tensors),
    outputs: r.outputs as V2RequestOutput[] | undefined,
    binaryOutputByDefault: r.parameters?.binary_data_output === true,
  };
}

/**
 * Refuses `parameters` that are not a JSON object, and a `flag` in them that is not a boolean:
 * either would otherwise be read as absent, and the request answered as if it were.
 */
function checkParameters(parameters: unknown, where: string, flag: string): void {
  if (parameters === undefined) return;
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters))
    throw new KilnError(KilnErrorCode.InvalidInput, `${where} must be a JSON object`);
  const value = (parameters as Record<string, unknown>)[flag];
  if (value !== undefined && typeof value !== 'boolean')
    throw new KilnError(KilnErrorCode.InvalidInput, `${where}.${flag} must be true or false`);
}

/** The output a request names, or InvalidInput naming the outputs there are. */
export function requestedOutput(outputs: NDList, name: string): AnyTensor {
  const tensor = outputs.find(name);
  if (tensor) return tensor;
  throw new KilnError(
    KilnErrorCode.InvalidInput,
    `unknown output ${name} (outputs: ${outputs.names.join(', ')})`,
  );
}

export interface V2Reply {
  readonly body: Uint8Array | Record<string, unknown>;
  /** Set when the reply carries binary data: the JSON header's byte length. */
  readonly headerLength: number | undefined;
}

/** Builds the v2 response: requested outputs only, binary where asked for. */
export function buildV2Reply(
  request: V2InferRequest,
  outputs: NDList,
  model: { name: string; version: string },
): V2Reply {
  const selected = request.outputs
    ? request.outputs.map((o) => ({
        tensor: requestedOutput(outputs, o.name),
        binary: o.parameters?.binary_data ?? request.binaryOutputByDefault,
      }))
    : outputs.tensors.map((tensor) => ({ tensor, binary: request.binaryOutputByDefault }));
  const chunks: Uint8Array[] = [];
  const json = selected.map(({ tensor, binary }, i) => {
    const name = tensor.name ?? `output_${i}`;
    if (!binary) return encodeV2Tensor(tensor, name);
    const bytes = encodeBinaryTensor(tensor);
    chunks.push(bytes);
    return {
      name,
      datatype: dtypeNames(tensor.dtype).v2,
      shape: [...tensor.shape],
      parameters: { binary_data_size: bytes.byteLength },
    };
  });
  const header = {
    model_name: model.name,
    ...(model.version ? { model_version: model.version } : {}),
    ...(request.id !== undefined ? { id: request.id } : {}),
    outputs: json,
  };
  if (chunks.length === 0) return { body: header, headerLength: undefined };
  const headerBytes = new TextEncoder().encode(JSON.stringify(header));
  const body = new Uint8Array(
    chunks.reduce((sum, c) => sum + c.byteLength, headerBytes.byteLength),
  );
  let offset = 0;
  for (const part of [headerBytes, ...chunks]) {
    body.set(part, offset);
    offset += part.byteLength;
  }
  return { body, headerLength: headerBytes.byteLength };
}
