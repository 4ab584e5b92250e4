import { inflateSync } from 'node:zlib';
import type * as JpegJs from 'jpeg-js';
import type * as PngJs from 'pngjs';
import { lazyModule } from '../lazy-module.js';
import { detectImageFormat } from '../codecs/detect.js';
import { KilnError, KilnErrorCode } from '../errors.js';

const jpeg = lazyModule<typeof JpegJs>('jpeg-js');
const pngjs = lazyModule<typeof PngJs>('pngjs');

/** Decoded pixels, row-major, `channels` interleaved bytes per pixel. */
export interface DecodedImage {
  readonly width: number;
  readonly height: number;
  /** 1 (grey), 3 (RGB) or 4 (RGBA). */
  readonly channels: number;
  readonly data: Uint8Array;
}

export interface ImageDecodeLimits {
  /** Largest image accepted, in megapixels (width × height / 1e6). */
  readonly maxResolutionInMP: number;
  /** Working memory the JPEG decoder may use, in MiB. */
  readonly maxMemoryUsageInMB: number;
}

export const DEFAULT_IMAGE_DECODE_LIMITS: ImageDecodeLimits = {
  maxResolutionInMP: 40,
  maxMemoryUsageInMB: 512,
};

/** Decodes a JPEG or PNG body; anything else, or a corrupt image, is INVALID_INPUT. */
export function decodeImage(
  bytes: Uint8Array,
  limits: ImageDecodeLimits = DEFAULT_IMAGE_DECODE_LIMITS,
): DecodedImage {
  const format = detectImageFormat(bytes);
  if (!format) {
    throw new KilnError(KilnErrorCode.InvalidInput, 'expected a JPEG or PNG image');
  }
  try {
    return format === 'jpeg' ? decodeJpeg(bytes, limits) : decodePng(bytes, limits);
  } catch (error) {
    if (error instanceof KilnError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    // jpeg-js reports its own limits only through the message.
    const code = /maxResolutionInMP|maxMemoryUsageInMB|allocate enough memory/.test(message)
      ? KilnErrorCode.PayloadTooLarge
      : KilnErrorCode.InvalidInput;
    throw new KilnError(code, `cannot decode the ${format.toUpperCase()} image: ${message}`, {
      cause: error,
    });
  }
}

function decodeJpeg(bytes: Uint8Array, limits: ImageDecodeLimits): DecodedImage {
  const image = jpeg().decode(bytes, {
    useTArray: true,
    formatAsRGBA: true,
    maxResolutionInMP: limits.maxResolutionInMP,
    maxMemoryUsageInMB: limits.maxMemoryUsageInMB,
  });
  if (image.width <= 0 || image.height <= 0) throw new Error('image has no pixels');
  return { width: image.width, height: image.height, channels: 4, data: image.data };
}

function decodePng(bytes: Uint8Array, limits: ImageDecodeLimits): DecodedImage {
  const header = readPngHeader(bytes);
  assertResolution(header.width, header.height, limits);
  if (header.interlaced) assertInterlacedDataBounded(bytes, header);
  // pngjs normalises every colour type and bit depth to 8-bit RGBA.
  const png = pngjs().PNG.sync.read(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  const data = new Uint8Array(png.data.buffer, png.data.byteOffset, png.data.byteLength);
  return { width: png.width, height: png.height, channels: 4, data };
}

interface PngHeader {
  width: number;
  height: number;
  /** Bits per pixel of the stored rows. */
  bitsPerPixel: number;
  interlaced: boolean;
}

const PNG_SAMPLES: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

/** Reads IHDR, so that the size is checked before pngjs allocates anything. */
function readPngHeader(bytes: Uint8Array): PngHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 33 || String.fromCharCode(...bytes.subarray(12, 16)) !== 'IHDR') {
    throw new Error('missing IHDR header');
  }
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  const depth = bytes[24]!;
  const samples = PNG_SAMPLES[bytes[25]!];
  if (width === 0 || height === 0 || samples === undefined) throw new Error('invalid IHDR header');
  return { width, height, bitsPerPixel: depth * samples, interlaced: bytes[28] === 1 };
}

function assertResolution(width: number, height: number, limits: ImageDecodeLimits): void {
  const megapixels = (width * height) / 1e6;
  if (megapixels > limits.maxResolutionInMP) {
    throw new KilnError(
      KilnErrorCode.PayloadTooLarge,
      `image is ${width}×${height} (${megapixels.toFixed(1)} MP), more than the ${limits.maxResolutionInMP} MP allowed`,
    );
  }
}

/**
 * pngjs inflates interlaced images without an output limit, so a small body could expand
 * without bound. Inflating once with a limit derived from the header rules that out.
 */
function assertInterlacedDataBounded(bytes: Uint8Array, header: PngHeader): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const idat: Uint8Array[] = [];
  let offset = 8;
  while (offset + 8 <= bytes.length) {
    const length = view.getUint32(offset);
    const type = String.fromCharCode(...bytes.subarray(offset + 4, offset + 8));
    const start = offset + 8;
    if (start + length > bytes.length) throw new Error(`truncated ${type} chunk`);
    if (type === 'IDAT') idat.push(bytes.subarray(start, start + length));
    if (type === 'IEND') break;
    offset = start + length + 4;
  }
  // Seven Adam7 passes add at most one filter byte per pass row to the plain row size.
  const rowBytes = Math.ceil((header.width * header.bitsPerPixel) / 8) + 1;
  const bound = 2 * rowBytes * header.height + 1024;
  try {
    inflateSync(Buffer.concat(idat), { maxOutputLength: bound });
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `cannot decode the PNG image: its data inflates past the ${header.width}×${header.height} size its header declares`,
    );
  }
}
