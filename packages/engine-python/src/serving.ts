import {
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  V2_BINARY_HEADER,
  buildV2Reply,
  bytesOf,
  encodeGrpcInferResponse,
  parseGrpcInferRequest,
  decodeTensors,
  parseV2Request,
  viewBytes,
  type AnyTensor,
  type GrpcInferRequest,
  type NumericDType,
  type PredictResult,
  type ServingChunkHead,
  type ServingInput,
  type ServingOutput,
  type V2InferRequest,
} from '@kiln/core';
import type { Content } from './frames.js';

/**
 * One request as the handler's Input has it (DJL's RequestParser): each query parameter a
 * content named by its key, then the body as it arrived — `data`, or its form field's name —
 * or each multipart part named by its field, with the request's headers as properties. Raw and
 * v2 tensors go as tensors, with no properties. `v2` is the parsed v2 request, to answer.
 */
export interface PythonRequest {
  readonly properties: Record<string, string>;
  readonly contents: Content[];
  /** Raw or v2 tensors: the answer's contents are tensors too (bytes as uint8). */
  readonly raw?: boolean;
  /** A v2 request (HTTP, or gRPC's message), answered as the protocol's reply naming its model. */
  readonly v2?: {
    request: V2InferRequest | GrpcInferRequest;
    grpc: boolean;
    model: { name: string; version: string };
  };
}

export function requestOf(input: ServingInput): PythonRequest {
  if (input.v2) {
    const body = input.body ?? new Uint8Array(0);
    const grpc = input.v2.grpc === true;
    const request = grpc
      ? parseGrpcInferRequest(body, { alignInPlace: input.owned === true })
      : parseV2Request(body, input.v2.headerLength);
    const model = { name: input.v2.model, version: input.v2.version };
    return {
      properties: {},
      contents: tensorContents(request.inputs),
      raw: true,
      v2: { request, grpc, model },
    };
  }
  if (input.rawTensors && input.tensors) {
    return { properties: {}, contents: tensorContents(input.tensors), raw: true };
  }
  const properties: Record<string, string> = { ...input.headers };
  // Kiln's own mark of a batch: from a client, it would split one request into as many.
  delete properties.batch_size;
  if (input.contentType !== undefined) properties['content-type'] = input.contentType;
  const contents: Content[] = (input.query ?? []).map(([name, value]) => ({
    name,
    bytes: new TextEncoder().encode(value),
  }));
  if (input.body) {
    contents.push({ name: input.field ?? 'data', bytes: input.body });
  } else if (input.parts && input.parts.length > 0) {
    for (const part of input.parts) contents.push({ name: part.name, bytes: part.data });
  } else if (input.tensors) {
    contents.push(...tensorContents(input.tensors));
  } else {
    throw new KilnError(KilnErrorCode.InvalidInput, 'the request carries no body');
  }
  return { properties, contents };
}

/**
 * One request's answer: its Output's properties (code, message included) and contents. A code
 * of 400 or more without contents fails the request with its message; with contents it is the
 * status they are sent with, as DJL Serving sends an Output.error().
 */
export function outputOf(
  request: PythonRequest,
  properties: Readonly<Record<string, unknown>>,
  contents: readonly Content[],
): PredictResult<ServingOutput> {
  try {
    const strings = stringProperties(properties);
    if (request.v2 || request.raw || contents.length === 0) failOnErrorCode(strings);
    if (request.v2) return { ok: true, value: v2Output(request.v2, contents) };
    if (request.raw) {
      return {
        ok: true,
        value: { type: 'tensors', tensors: new NDList(contents.map(contentTensor)) },
      };
    }
    const headers = responseHeaders(strings);
    const status = statusOf(strings);
    const extra = { ...(headers ? { headers } : {}), ...(status === 200 ? {} : { status }) };
    // A handler that returned None: nothing to send.
    if (status === 204) return { ok: true, value: { type: 'json', value: null, ...extra } };
    const body = contents.find((content) => !content.dtype);
    if (body) {
      const output = bodyOutput(body.bytes, property(strings, 'content-type'));
      return { ok: true, value: { ...output, ...extra } };
    }
    const value: ServingOutput =
      contents.length === 0
        ? { type: 'json', value: null, ...extra }
        : { type: 'tensors', tensors: new NDList(contents.map(contentTensor)), ...extra };
    return { ok: true, value };
  } catch (error) {
    return { ok: false, error: KilnError.wrap(error, KilnErrorCode.EngineError) };
  }
}

/** How a streamed answer starts, from the properties its first chunk carries. */
export function chunkHeadOf(properties: Readonly<Record<string, unknown>>): ServingChunkHead {
  const strings = stringProperties(properties);
  const headers = responseHeaders(strings);
  return {
    status: statusOf(strings),
    contentType: property(strings, 'content-type'),
    ...(headers ? { headers } : {}),
  };
}

/** The Output's code as an HTTP status: 200 when it names none that HTTP can send with a body. */
function statusOf(properties: Record<string, string>): number {
  const code = Number(properties.code ?? 200);
  return Number.isInteger(code) && code >= 200 && code <= 599 ? code : 200;
}

function v2Output(
  v2: NonNullable<PythonRequest['v2']>,
  contents: readonly Content[],
): ServingOutput {
  const tensors = new NDList(contents.map(contentTensor));
  if (v2.grpc) {
    const body = encodeGrpcInferResponse(v2.request as GrpcInferRequest, tensors, v2.model);
    return { type: 'bytes', body, contentType: 'application/grpc' };
  }
  const reply = buildV2Reply(v2.request as V2InferRequest, tensors, v2.model);
  return reply.headerLength === undefined
    ? { type: 'json', value: reply.body }
    : {
        type: 'bytes',
        body: reply.body as Uint8Array,
        contentType: 'application/octet-stream',
        headers: { [V2_BINARY_HEADER]: String(reply.headerLength) },
      };
}

function tensorContents(list: NDList): Content[] {
  return list.tensors.map((tensor, i) => tensorContent(tensor, tensor.name ?? `input${i}`));
}

function tensorContent(tensor: AnyTensor, name: string): Content {
  if (tensor.dtype === 'string') {
    return { name, bytes: new TextEncoder().encode((tensor.data as string[]).join('')) };
  }
  return { name, dtype: tensor.dtype, shape: tensor.shape, bytes: bytesOf(tensor.data as never) };
}

/** A content as a tensor: raw bytes as uint8. */
export function contentTensor(content: Content): AnyTensor {
  if (!content.dtype || content.dtype === 'string') {
    return new Tensor('uint8', content.bytes, [content.bytes.length], content.name);
  }
  const dtype = content.dtype as NumericDType;
  return new Tensor(
    dtype,
    viewBytes(dtype, content.bytes) as never,
    content.shape ?? [],
    content.name,
  );
}

function stringProperties(properties: Readonly<Record<string, unknown>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(properties)) {
    if (value !== undefined && value !== null) out[key] = String(value);
  }
  return out;
}

/** Case-insensitive property lookup (HTTP headers arrive lower-cased, handlers may not). */
export function property(properties: Record<string, string>, key: string): string | undefined {
  if (key in properties) return properties[key];
  const lower = key.toLowerCase();
  for (const [k, v] of Object.entries(properties)) if (k.toLowerCase() === lower) return v;
  return undefined;
}

/** Output properties that describe the answer itself rather than headers to send. */
const ANSWER_PROPERTIES = new Set(['content-type', 'code', 'message', 'batch_size']);

/**
 * The handler's `Output.add_property` entries as response headers, as DJL Serving sends them:
 * all but the answer's own (content type, code, message) and Kiln's `kiln_*` ones. The server
 * writes those of them that are valid HTTP and not its own to write.
 */
export function responseHeaders(
  properties: Readonly<Record<string, string>>,
): Record<string, string> | undefined {
  let headers: Record<string, string> | undefined;
  for (const [key, value] of Object.entries(properties)) {
    const name = key.toLowerCase();
    if (ANSWER_PROPERTIES.has(name) || name.startsWith('kiln_')) continue;
    (headers ??= {})[name] = String(value);
  }
  return headers;
}

/** A handler's code ≥ 400 fails the request with its message and code. */
export function failOnErrorCode(properties: Record<string, string>): void {
  const code = Number(properties.code ?? 200);
  if (code < 400) return;
  throw new KilnError(
    code >= 500 ? KilnErrorCode.EngineError : KilnErrorCode.InvalidInput,
    properties.message && properties.message !== 'OK'
      ? properties.message
      : `the handler answered ${code}`,
    { details: { code, httpStatus: code } },
  );
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The first bytes content of an Output as a response: tensors (npy, npz, ndlist, safetensors)
 * as tensors, re-encoded per `Accept`; JSON (by its content type, or by its look when it has
 * none) as JSON; anything else as the handler wrote it, under its content type, or none when
 * it gave none, as DJL Serving answers it.
 */
function bodyOutput(bytes: Uint8Array, contentType: string | undefined): ServingOutput {
  const type = contentType?.toLowerCase() ?? '';
  if (type.startsWith('tensor/') || type === 'application/x-npy' || isNumpyFile(bytes)) {
    return {
      type: 'tensors',
      tensors: decodeTensors(bytes, contentType ? { contentType } : {}),
    };
  }
  if (JSON_TYPE.test(type)) {
    try {
      return { type: 'json', value: JSON.parse(utf8OrUndefined(bytes) ?? '') as unknown };
    } catch {
      throw new KilnError(
        KilnErrorCode.EngineError,
        'the handler answered application/json that is not JSON',
      );
    }
  }
  if (type === '' && looksLikeJson(bytes)) {
    try {
      return { type: 'json', value: JSON.parse(UTF8.decode(bytes)) as unknown };
    } catch {
      // Bytes that only look like JSON go out as they are.
    }
  }
  return { type: 'bytes', body: bytes, contentType: contentType || undefined };
}

/** application/json and its +json kinds; not JSON lines, which are many JSON values. */
const JSON_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/;

function utf8OrUndefined(bytes: Uint8Array): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

function isNumpyFile(bytes: Uint8Array): boolean {
  return (
    (bytes[0] === 0x93 && bytes[1] === 0x4e && bytes[2] === 0x55) || // \x93NUMPY
    (bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03) // PK\x03 (npz)
  );
}

/** Whether the first byte that is not JSON whitespace opens an object, array or string. */
function looksLikeJson(bytes: Uint8Array): boolean {
  for (const byte of bytes) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
    return byte === 0x7b || byte === 0x5b || byte === 0x22;
  }
  return false;
}
