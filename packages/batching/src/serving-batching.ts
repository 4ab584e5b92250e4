import {
  type Batchifier,
  type SequenceBatching,
  type ServingInput,
  StackBatchifier,
  fromV2DType,
  grpcInferLayout,
  npyLayout,
  npzShape,
} from '@kiln/core';
import { BucketBatchifier } from './bucket-batchifier.js';
import type { BucketKey } from './job.js';
import { lengthBucketer } from './length-bucketer.js';
import { PadBatchifier } from './pad-batchifier.js';

/** The batchifier serving.properties asks for (`batchifier=…`); null runs inputs one by one. */
export function batchifierFor(settings: SequenceBatching): Batchifier | null {
  const pad = {
    padValue: settings.padValue,
    ...(settings.padAxes ? { axes: settings.padAxes } : {}),
  };
  switch (settings.batchifier) {
    case 'none':
      return null;
    case 'stack':
      return new StackBatchifier();
    case 'pad':
      return new PadBatchifier(pad);
    case 'bucket':
      return new BucketBatchifier({
        ...pad,
        boundaries: settings.bucketBoundaries!,
        lengthAxis: settings.lengthAxis,
        ...(settings.bucketBy === undefined ? {} : { bucketBy: settings.bucketBy }),
      });
  }
}

/**
 * A queue's `bucketOf` for `batchifier=bucket`: a request's length bucket, read where that is
 * cheap on the calling thread — tensors it already carries, the headers of a .npy body, of a
 * stored .npz body (numpy.savez) or of .npy parts of a multipart request. Other requests
 * (JSON, compressed npz, ndlist, v2 bodies) share the bucket
 * `undefined`; the worker's BucketBatchifier still splits their batches by bucket.
 */
export function servingBucketOf(
  settings: SequenceBatching,
): ((input: ServingInput) => BucketKey | undefined) | undefined {
  const boundaries = settings.bucketBoundaries;
  if (settings.batchifier !== 'bucket' || boundaries === undefined) return undefined;
  const bucket = lengthBucketer(boundaries, (length: number) => length);
  const axis = settings.lengthAxis;
  const lengthOf = (shape: readonly number[] | undefined) =>
    shape !== undefined && shape.length > axis ? shape[axis] : undefined;
  const name = settings.bucketBy;
  return (input) => {
    let length: number | undefined;
    if (input.tensors) {
      const tensor =
        (name === undefined ? undefined : input.tensors.tensors.find((t) => t.name === name)) ??
        input.tensors.tensors[0];
      length = lengthOf(tensor?.shape);
    } else if (input.parts) {
      const part =
        (name === undefined ? undefined : input.parts.find((p) => p.name === name)) ??
        input.parts[0];
      length = part && lengthOf(boundedNpyLayout(part.data)?.shape);
    } else if (input.body && !input.v2) {
      const zip = input.body[0] === 0x50 && input.body[1] === 0x4b; // PK: an .npz archive
      const shapeOf = (npy: Uint8Array) => boundedNpyLayout(npy)?.shape;
      length = lengthOf(zip ? npzShape(input.body, name, shapeOf) : shapeOf(input.body));
    }
    return length === undefined ? undefined : bucket(length);
  };
}

/**
 * A queue's `bucketOf` that decides batch makeup where the requests arrive: only requests
 * whose tensors can share one batch under the model's batchifier go together. A request's
 * key is the layout it declares (declaredLayout): each tensor's name, dtype, rank and every
 * axis but the batch axis, padded axes left out (`batchifier=pad`); its length bucket under
 * `batchifier=bucket`. Requests that declare no layout before decoding (images, JSON) share
 * the key `undefined`; for them the worker's Predictor still parts what cannot share a batch.
 * Undefined for `batchifier=none`, where nothing is batched.
 */
export function servingBatchKeyOf(
  settings: SequenceBatching | undefined,
): ((input: ServingInput) => BucketKey | undefined) | undefined {
  if (settings?.batchifier === 'bucket') return servingBucketOf(settings);
  if (settings?.batchifier === 'none') return undefined;
  const padded = settings?.batchifier === 'pad' ? (settings.padAxes ?? 'all') : undefined;
  // Clients send the same header over and over: the last header's bytes and key are kept, so
  // that a request whose header matches them byte for byte costs a compare, not a parse.
  let lastHeader: Uint8Array | undefined;
  let lastKey: BucketKey | undefined;
  return (input) => {
    const header = headerBytes(input);
    if (header && lastHeader && equalBytes(header, lastHeader)) return lastKey;
    const layout = declaredLayout(input);
    const key = layout && layoutKey(layout, padded);
    if (header) [lastHeader, lastKey] = [header.slice(), key];
    return key;
  };
}

/**
 * The bytes of a body that declare its whole layout, when they are few: a .npy body's header,
 * a binary v2 request's JSON header. Undefined for anything else.
 */
function headerBytes(input: ServingInput): Uint8Array | undefined {
  const { body, v2 } = input;
  if (!body || input.tensors || input.parts) return undefined;
  let length: number;
  if (v2) {
    if (v2.grpc) return undefined;
    length = Number(v2.headerLength);
    if (!Number.isInteger(length) || length > MAX_DECLARED_HEADER) return undefined;
  } else {
    const header = npyHeaderLength(body);
    if (header === undefined) return undefined;
    length = header;
  }
  return length > 0 && length <= body.length ? body.subarray(0, length) : undefined;
}

/**
 * A .npy file's header bytes (magic, version, length and the header itself), from its first 12
 * bytes; undefined for no .npy or a header past MAX_DECLARED_HEADER (left to the worker).
 */
function npyHeaderLength(bytes: Uint8Array): number | undefined {
  // Magic (6), version (2), then the header's length: 2 bytes in 1.0, 4 after.
  if (bytes.length < 12 || bytes[0] !== 0x93 || bytes[1] !== 0x4e) return undefined;
  const low = bytes[8]! | (bytes[9]! << 8);
  const length =
    bytes[6] === 1 ? 10 + low : 12 + low + bytes[10]! * 0x10000 + bytes[11]! * 0x1000000;
  return length <= MAX_DECLARED_HEADER ? length : undefined;
}

/** A .npy layout read on the calling thread, when its header is within MAX_DECLARED_HEADER. */
function boundedNpyLayout(bytes: Uint8Array): { dtype: string; shape: number[] } | undefined {
  return npyHeaderLength(bytes) === undefined ? undefined : npyLayout(bytes);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A tensor as a request declares it, before it is decoded. */
export interface DeclaredTensor {
  readonly name: string | undefined;
  /** Kiln's dtype (`float32`, `string`…), whatever the wire format calls it. */
  readonly dtype: string;
  readonly shape: readonly number[];
}

/**
 * Largest header (a v2 request's JSON, a .npy header) read on the calling thread; larger ones
 * are left to the worker's decoder, so that a hostile one costs this thread no parse.
 */
const MAX_DECLARED_HEADER = 4096;
/** Most multipart tensor parts read on the calling thread. */
const MAX_DECLARED_PARTS = 64;

/**
 * The tensors a request declares, read where that is cheap on the calling thread: tensors it
 * already carries, the header of a .npy body or of .npy parts of a multipart request, the
 * JSON header of a binary v2 request, and the inputs' names, datatypes and shapes of a gRPC
 * ModelInferRequest (its contents skipped). Undefined for anything else (images, JSON, npz, v2
 * bodies all JSON) and for headers that do not parse: the worker's decoder answers for those.
 */
export function declaredLayout(input: ServingInput): DeclaredTensor[] | undefined {
  if (input.tensors)
    return input.tensors.tensors.map(({ name, dtype, shape }) => ({ name, dtype, shape }));
  if (input.parts) {
    if (input.parts.length > MAX_DECLARED_PARTS) return undefined;
    const layout: DeclaredTensor[] = [];
    for (const part of input.parts) {
      const declared = boundedNpyLayout(part.data);
      if (!declared) return undefined;
      layout.push({ name: part.name, ...declared });
    }
    return layout;
  }
  const { body, v2 } = input;
  if (!body) return undefined;
  if (!v2) {
    const declared = boundedNpyLayout(body);
    return declared && [{ name: undefined, ...declared }];
  }
  if (!v2.grpc) return v2HeaderLayout(body, v2.headerLength);
  try {
    return grpcInferLayout(body)?.map(({ name, datatype, shape }) => ({
      name,
      dtype: fromV2DType(datatype),
      shape,
    }));
  } catch {
    return undefined;
  }
}

/** The inputs a binary v2 request's JSON header declares. */
function v2HeaderLayout(
  body: Uint8Array,
  headerLength: string | undefined,
): DeclaredTensor[] | undefined {
  const length = Number(headerLength);
  if (!Number.isInteger(length) || length <= 0 || length > body.length) return undefined;
  if (length > MAX_DECLARED_HEADER) return undefined;
  try {
    const header: unknown = JSON.parse(
      Buffer.from(body.buffer, body.byteOffset, length).toString(),
    );
    const inputs = (header as { inputs?: unknown }).inputs;
    if (!Array.isArray(inputs)) return undefined;
    return inputs.map((item: unknown) => {
      const { name, datatype, shape } = item as {
        name: unknown;
        datatype: unknown;
        shape: unknown;
      };
      if (typeof name !== 'string' || typeof datatype !== 'string' || !Array.isArray(shape))
        throw new Error('not a v2 input');
      if (!shape.every((d) => Number.isInteger(d) && d >= 0)) throw new Error('not a shape');
      return { name, dtype: fromV2DType(datatype), shape: shape as number[] };
    });
  } catch {
    return undefined;
  }
}

/** What must match for tensors to share a batch: all but the batch axis and padded axes. */
function layoutKey(
  layout: readonly DeclaredTensor[],
  padded: readonly number[] | 'all' | undefined,
) {
  return layout
    .map(({ name = '', dtype, shape }) => {
      const axes = shape.map((size, axis) =>
        axis === 0 || padded === 'all' || padded?.includes(axis) ? '*' : size,
      );
      return `${name}:${dtype}:${axes.join(',')}`;
    })
    .join(';');
}
