import { KilnError, KilnErrorCode } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import {
  TENSOR_CONTENT_TYPES,
  type TensorFormat,
  detectImageFormat,
  detectTensorFormat,
  formatForContentType,
} from './detect.js';
import { DEFAULT_MAX_DECODED_BYTES, malformed } from './limits.js';
import { decodeNDList, encodeNDList } from './ndlist.js';
import { decodeNpy, encodeNpy } from './npy.js';
import { decodeNpz, encodeNpz } from './npz.js';
import { decodeSafetensors, encodeSafetensors } from './safetensors.js';
import { decodeJsonTensors, encodeJsonTensors } from './v2-json.js';

export interface DecodeTensorsOptions {
  /** The body's media type; it wins over detection when it names a tensor format. */
  contentType?: string;
  /** Most bytes the body may hold, and (for npz) inflate to. Default 1 GiB. */
  maxBytes?: number;
}

export interface EncodeTensorsOptions {
  /** npz only: deflate the entries. Default false: tensors rarely shrink enough to pay for it. */
  compress?: boolean;
}

export interface EncodedTensors {
  body: Uint8Array;
  contentType: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** Decodes a request body in any supported tensor format. */
export function decodeTensors(bytes: Uint8Array, options: DecodeTensorsOptions = {}): NDList {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_DECODED_BYTES;
  if (bytes.byteLength > maxBytes) {
    throw new KilnError(
      KilnErrorCode.PayloadTooLarge,
      `a tensor body of ${bytes.byteLength} bytes exceeds ${maxBytes}`,
    );
  }
  const named = formatForContentType(options.contentType);
  const format = named ?? detectTensorFormat(bytes);
  // ndlist is what detection falls back to: an image would be misread as one.
  if (named === undefined && format === 'ndlist') refuseImage(bytes);
  switch (format) {
    case 'npz':
      return decodeNpz(bytes, { maxBytes });
    case 'npy':
      return NDList.of(decodeNpy(bytes));
    case 'safetensors':
      return decodeSafetensors(bytes);
    case 'json':
      return decodeJsonTensors(parseJson(bytes));
    case 'ndlist':
      return decodeNDList(bytes);
  }
}

/**
 * An image sent to a model that takes tensors would otherwise be read as DJL ndlist and fail
 * with a confusing count: name what happened and what to send instead.
 */
function refuseImage(bytes: Uint8Array): void {
  const image = detectImageFormat(bytes);
  if (!image) return;
  throw new KilnError(
    KilnErrorCode.UnsupportedFormat,
    `the body is a ${image.toUpperCase()} image, but this model takes tensors: send npy, npz, safetensors, DJL ndlist or JSON tensors, or set translatorFactory (e.g. translatorFactory=image-classification in serving.properties) for the model to take images`,
    { details: { hint: 'set translatorFactory=image-classification to take images' } },
  );
}

function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch {
    throw malformed('json', 'body is not valid UTF-8 JSON');
  }
}

/** Encodes tensors for a reply in `format` (see `formatForAccept`). */
export function encodeTensors(
  list: NDList,
  format: TensorFormat,
  options: EncodeTensorsOptions = {},
): EncodedTensors {
  return { body: encodeBody(list, format, options), contentType: TENSOR_CONTENT_TYPES[format] };
}

function encodeBody(list: NDList, format: TensorFormat, options: EncodeTensorsOptions): Uint8Array {
  switch (format) {
    case 'npz':
      return encodeNpz(list, { compress: options.compress ?? false });
    case 'npy':
      if (list.length !== 1) {
        throw new KilnError(
          KilnErrorCode.InvalidInput,
          `npy holds exactly one tensor, not ${list.length}`,
        );
      }
      return encodeNpy(list.get(0));
    case 'safetensors':
      return encodeSafetensors(list);
    case 'json':
      return encoder.encode(JSON.stringify(encodeJsonTensors(list)));
    case 'ndlist':
      return encodeNDList(list);
  }
}
