import { NPY_MAGIC } from './npy.js';

export type TensorFormat = 'npz' | 'npy' | 'safetensors' | 'ndlist' | 'json';

export const TENSOR_CONTENT_TYPES: Readonly<Record<TensorFormat, string>> = {
  npz: 'tensor/npz',
  npy: 'tensor/npy',
  safetensors: 'tensor/safetensors',
  ndlist: 'tensor/ndlist',
  json: 'application/json',
};

const Q_VALUE = /^(0(\.\d{0,3})?|1(\.0{0,3})?)$/;
const JSON_SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

function startsWith(bytes: Uint8Array, prefix: ArrayLike<number>): boolean {
  if (bytes.byteLength < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

export type ImageFormat = 'jpeg' | 'png';

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** The image format announced by the first bytes, or undefined for anything else. */
export function detectImageFormat(bytes: Uint8Array): ImageFormat | undefined {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff)
    return 'jpeg';
  if (bytes.length >= 8 && PNG_SIGNATURE.every((b, i) => bytes[i] === b)) return 'png';
  return undefined;
}

/**
 * Picks a decoder from the first bytes, as DJL does: a zip local header (or an empty zip's end
 * record) is npz, `\x93NUMPY` is npy, a little-endian u64 header length that fits followed by `{`
 * is safetensors, a leading `{` or `[` is JSON, and anything else is DJL's ndlist.
 */
export function detectTensorFormat(bytes: Uint8Array): TensorFormat {
  if (startsWith(bytes, [0x50, 0x4b, 0x03, 0x04]) || startsWith(bytes, [0x50, 0x4b, 0x05, 0x06])) {
    return 'npz';
  }
  if (startsWith(bytes, NPY_MAGIC)) return 'npy';
  if (bytes.byteLength >= 9 && bytes[8] === 0x7b) {
    const headerLength = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
    if (8n + headerLength <= BigInt(bytes.byteLength)) return 'safetensors';
  }
  for (const byte of bytes) {
    if (JSON_SPACE.has(byte)) continue;
    if (byte === 0x7b || byte === 0x5b) return 'json';
    break;
  }
  return 'ndlist';
}

/**
 * numpy's media types as other serving stacks spell them (SageMaker's NumpySerializer sends and
 * accepts `application/x-npy`): read as npy and npz, and echoed in the answer when asked for.
 */
export const NUMPY_MEDIA_TYPES: Readonly<Record<string, TensorFormat>> = {
  'application/x-npy': 'npy',
  'application/x-npz': 'npz',
};

const FORMAT_OF_MEDIA_TYPE = new Map<string, TensorFormat>([
  ...Object.entries(TENSOR_CONTENT_TYPES).map(([f, type]) => [type, f as TensorFormat] as const),
  ...Object.entries(NUMPY_MEDIA_TYPES),
]);

/** The format named by a media type, or undefined when it names none of them. */
export function formatForContentType(contentType: string | undefined): TensorFormat | undefined {
  if (contentType === undefined) return undefined;
  // Most requests spell it exactly: no string to cut or lower-case.
  const exact = FORMAT_OF_MEDIA_TYPE.get(contentType);
  if (exact !== undefined) return exact;
  return FORMAT_OF_MEDIA_TYPE.get(contentType.split(';')[0]!.trim().toLowerCase());
}

/** How to answer with tensors: the format, and the content type to label the answer with. */
export interface TensorReply {
  readonly format: TensorFormat;
  readonly contentType: string;
}

/**
 * The reply for an `Accept` header: the acceptable tensor format with the highest q-value
 * (earliest on ties), else DJL's default, ndlist. With `tensorCount` other than 1, npy (a
 * single-array format) is passed over. The answer is labelled with Kiln's type for the format,
 * or with numpy's when that is what was asked for. When `Accept` names no tensor format, a
 * request sent as npz or safetensors (`requestContentType`) is answered in kind, as DJL does.
 */
export function replyForAccept(
  accept: string | undefined,
  tensorCount?: number,
  requestContentType?: string,
): TensorReply {
  let best: { format: TensorFormat; media: string; q: number } | undefined;
  for (const range of (accept ?? '').split(',')) {
    const [media, ...params] = range.split(';').map((part) => part.trim());
    const format = formatForContentType(media);
    const fits = format !== 'npy' || tensorCount === undefined || tensorCount === 1;
    if (format === undefined || !fits) continue;
    const q = qValue(params);
    if (q > 0 && (best === undefined || q > best.q)) best = { format, media: media!, q };
  }
  if (!best) return inKind(requestContentType);
  const media = best.media.toLowerCase();
  return {
    format: best.format,
    contentType: Object.hasOwn(NUMPY_MEDIA_TYPES, media)
      ? media
      : TENSOR_CONTENT_TYPES[best.format],
  };
}

/** Formats a request's tensors answer in when the client names none. */
const ANSWERED_IN_KIND: ReadonlySet<TensorFormat> = new Set(['npz', 'safetensors']);

function inKind(requestContentType: string | undefined): TensorReply {
  const format = formatForContentType(requestContentType);
  if (format === undefined || !ANSWERED_IN_KIND.has(format))
    return { format: 'ndlist', contentType: TENSOR_CONTENT_TYPES.ndlist };
  const media = requestContentType!.split(';')[0]!.trim().toLowerCase();
  return {
    format,
    contentType: Object.hasOwn(NUMPY_MEDIA_TYPES, media) ? media : TENSOR_CONTENT_TYPES[format],
  };
}

/** The reply format for an `Accept` header (see `replyForAccept`). */
export function formatForAccept(accept: string | undefined, tensorCount?: number): TensorFormat {
  return replyForAccept(accept, tensorCount).format;
}

function qValue(params: readonly string[]): number {
  for (const param of params) {
    const [key, value] = param.split('=').map((part) => part.trim());
    if (key?.toLowerCase() !== 'q') continue;
    // RFC 9110 qvalue syntax; anything else makes the range unacceptable.
    return value !== undefined && Q_VALUE.test(value) ? Number(value) : 0;
  }
  return 1;
}
