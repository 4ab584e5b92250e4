import {
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  decodeTensors,
  type AnyTensor,
  type Batch,
  type Batchifier,
  type ServingInput,
  type ServingOutput,
  type Translator,
  type TranslatorContext,
} from '@kiln/core';

/**
 * Name of the string tensor that carries a call's properties (HTTP headers, content type,
 * the handler's output properties) next to its contents through the NDList a predictor
 * hands the execution context.
 */
export const META_TENSOR = '__kiln_meta__';

/** The property that marks a call as a batch, and says how many requests it holds. */
const BATCH_SIZE = 'batch_size';

/** Properties and which contents are raw bytes (a request body) rather than tensors. */
export interface CallMeta {
  readonly properties: Record<string, string>;
  /** Names of contents that are bytes; every other content is a tensor. */
  readonly bytes: readonly string[];
}

/** DJL's prefix of request `index` inside a batch: `batch_000_`. */
export function batchPrefix(index: number): string {
  return `batch_${String(index).padStart(3, '0')}_`;
}

const BATCH_PREFIX = /^batch_(\d{3})_/;
const BATCH_PREFIX_LENGTH = 'batch_000_'.length;

/** The request index a `batch_NNN_` name belongs to, or undefined for an unprefixed name. */
function batchIndexOf(name: string): number | undefined {
  const match = BATCH_PREFIX.exec(name);
  return match ? Number(match[1]) : undefined;
}

/**
 * A meta tensor made in this thread keeps its meta as an object: a call's meta is written once
 * and read two or three times on the same thread (translator, batchifier, execution context),
 * and reading it from here spares a JSON parse each time (and a WeakMap entry per request,
 * which cost more than the JSON). The JSON stays the tensor's data, so a copy of the tensor
 * (another thread) still reads the same meta.
 */
class MetaTensor extends Tensor<'string'> {
  constructor(
    readonly meta: CallMeta,
    name: string | undefined,
    json = JSON.stringify(meta),
  ) {
    super('string', [json], [1], name);
  }

  override withName(name: string | undefined): Tensor<'string'> {
    return new MetaTensor(this.meta, name, this.data[0]);
  }
}

export function metaTensor(meta: CallMeta, name = META_TENSOR): AnyTensor {
  return new MetaTensor(meta, name);
}

export function readMeta(tensor: AnyTensor): CallMeta {
  if (tensor instanceof MetaTensor) return tensor.meta;
  const parsed = JSON.parse((tensor.data as string[])[0] ?? '{}') as Partial<CallMeta>;
  return { properties: parsed.properties ?? {}, bytes: parsed.bytes ?? [] };
}

/** Splits a list into its meta (when present) and its contents. */
export function splitMeta(list: NDList): { meta: CallMeta | undefined; tensors: AnyTensor[] } {
  let meta: CallMeta | undefined;
  const tensors: AnyTensor[] = [];
  for (const tensor of list) {
    if (tensor.name === META_TENSOR) meta = readMeta(tensor);
    else tensors.push(tensor);
  }
  return { meta, tensors };
}

/** Case-insensitive property lookup (HTTP headers arrive lower-cased, handlers may not). */
export function property(properties: Record<string, string>, key: string): string | undefined {
  if (key in properties) return properties[key];
  const lower = key.toLowerCase();
  for (const [k, v] of Object.entries(properties)) if (k.toLowerCase() === lower) return v;
  return undefined;
}

/**
 * Python mode's translator: the request body goes to the handler exactly as it arrived
 * (`Input.get_as_image()`, `get_as_json()`, `get_as_bytes()` work on it) with the request's
 * headers as properties, and the handler's Output comes back as the response.
 */
export class PythonServingTranslator implements Translator<ServingInput, ServingOutput> {
  readonly batchifier = new PythonBatchifier();

  processInput(_ctx: TranslatorContext, input: ServingInput): NDList {
    const properties: Record<string, string> = { ...input.headers };
    // Kiln's own mark of a batch: from a client, it would have the worker split one request
    // into as many empty ones as it names.
    if (BATCH_SIZE in properties) delete properties[BATCH_SIZE];
    if (input.contentType !== undefined) properties['content-type'] = input.contentType;
    if (input.body) {
      const body = new Tensor('uint8', input.body, [input.body.byteLength], 'data');
      return NDList.of(body, metaTensor({ properties, bytes: ['data'] }));
    }
    // Several multipart parts (when the server hands them on undecoded): one content each,
    // named by its form field, as DJL's Input has them.
    const parts = (input as { parts?: readonly { name: string; data: Uint8Array }[] }).parts;
    if (parts && parts.length > 0) {
      const tensors = parts.map(
        (part) => new Tensor('uint8', part.data, [part.data.length], part.name),
      );
      return new NDList([...tensors, metaTensor({ properties, bytes: parts.map((p) => p.name) })]);
    }
    if (input.tensors) {
      return new NDList([...input.tensors.tensors, metaTensor({ properties, bytes: [] })]);
    }
    throw new KilnError(KilnErrorCode.InvalidInput, 'the request carries no body');
  }

  processOutput(_ctx: TranslatorContext, output: NDList): ServingOutput {
    const { meta, tensors } = splitMeta(output);
    if (!meta) return { type: 'tensors', tensors: new NDList(tensors) };
    failOnErrorCode(meta.properties);
    const headers = responseHeaders(meta.properties);
    const withHeaders = headers ? { headers } : {};
    // A handler that returned None: nothing to send.
    if (Number(meta.properties.code) === 204) {
      return { type: 'json', value: null, status: 204, ...withHeaders };
    }
    const bytes = new Set(meta.bytes);
    const body = tensors.find((t) => t.name !== undefined && bytes.has(t.name));
    if (!body) {
      return tensors.length === 0
        ? { type: 'json', value: null, ...withHeaders }
        : { type: 'tensors', tensors: new NDList(tensors), ...withHeaders };
    }
    return {
      ...bodyOutput(body.data as Uint8Array, property(meta.properties, 'content-type')),
      ...withHeaders,
    };
  }
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
 * none) as JSON; anything else as the handler wrote it, under its content type (text without
 * one as `text/plain`), as DJL Serving answers it.
 */
function bodyOutput(bytes: Uint8Array, contentType: string | undefined): ServingOutput {
  const type = contentType?.toLowerCase() ?? '';
  if (type.startsWith('tensor/') || type === 'application/x-npy' || isNumpyFile(bytes)) {
    return {
      type: 'tensors',
      tensors: decodeTensors(bytes, contentType ? { contentType } : {}),
    };
  }
  const text = utf8OrUndefined(bytes);
  if (type.includes('json')) {
    try {
      return { type: 'json', value: JSON.parse(text ?? '') as unknown };
    } catch {
      throw new KilnError(
        KilnErrorCode.EngineError,
        'the handler answered application/json that is not JSON',
      );
    }
  }
  if (type === '' && text !== undefined && looksLikeJson(text)) {
    try {
      return { type: 'json', value: JSON.parse(text) as unknown };
    } catch {
      // Text that only looks like JSON goes out as text.
    }
  }
  const fallback = text === undefined ? 'application/octet-stream' : 'text/plain; charset=utf-8';
  return { type: 'bytes', body: bytes, contentType: contentType || fallback };
}

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

function looksLikeJson(text: string): boolean {
  return /^\s*[[{"]/.test(text);
}

/**
 * DJL's batching for Python mode: one call whose properties hold `batch_size` and whose
 * properties and contents are prefixed `batch_NNN_` per request; the handler's answer is
 * split back by the same prefixes, so each result reaches its own response.
 */
export class PythonBatchifier implements Batchifier {
  readonly name = 'python-batch';

  canBatch(): boolean {
    return true;
  }

  batchify(inputs: readonly NDList[]): Batch {
    const tensors: AnyTensor[] = [];
    const hadMeta: boolean[] = [];
    inputs.forEach((list, index) => {
      const prefix = batchPrefix(index);
      let withMeta = false;
      // Every name gets the request's prefix; the names inside a meta stay the request's own
      // (the execution context prefixes them as it reads the meta).
      for (const tensor of list) {
        if (tensor.name === META_TENSOR) {
          withMeta = true;
          tensors.push(tensor.withName(prefix + META_TENSOR));
        } else {
          tensors.push(tensor.withName(prefix + (tensor.name ?? '')));
        }
      }
      hadMeta.push(withMeta);
    });
    tensors.push(metaTensor({ properties: { [BATCH_SIZE]: String(inputs.length) }, bytes: [] }));
    return {
      input: new NDList(tensors),
      unbatchify: (output) => unbatchify(output, hadMeta),
    };
  }
}

function unbatchify(output: NDList, hadMeta: readonly boolean[]): NDList[] {
  const { meta, tensors } = splitMeta(output);
  const bytes = new Set(meta?.bytes ?? []);
  const shared: Record<string, string> = {};
  // One pass over the answer's properties and contents, each to the request its prefix names.
  const requests = hadMeta.map(() => ({
    properties: {} as Record<string, string>,
    tensors: [] as AnyTensor[],
    bytes: [] as string[],
  }));
  for (const [key, value] of Object.entries(meta?.properties ?? {})) {
    const index = batchIndexOf(key);
    if (index === undefined) {
      // Code and message too: a batch answered 503 as a whole fails every request of it.
      shared[key] = value;
    } else {
      const request = requests[index];
      if (request) request.properties[key.slice(BATCH_PREFIX_LENGTH)] = value;
    }
  }
  for (const tensor of tensors) {
    const name = tensor.name ?? '';
    const index = batchIndexOf(name);
    if (index === undefined) {
      throw new KilnError(
        KilnErrorCode.EngineError,
        'the handler answered a batch with contents not named batch_NNN_ (use Output.add(..., batch_index=i) or return one Output per request)',
      );
    }
    const request = requests[index];
    if (!request) continue;
    const own = name.slice(BATCH_PREFIX_LENGTH);
    request.tensors.push(tensor.withName(own));
    if (bytes.has(name)) request.bytes.push(own);
  }
  return requests.map((request, index) => {
    const properties = { ...shared, ...request.properties };
    if (!hadMeta[index]) {
      failOnErrorCode(properties);
      return new NDList(request.tensors);
    }
    return new NDList([...request.tensors, metaTensor({ properties, bytes: request.bytes })]);
  });
}
