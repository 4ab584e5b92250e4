import { Tensor } from '../tensor/tensor.js';
import type { DecodedImage } from './image-decode.js';

export type ChannelOrder = 'RGB' | 'BGR';
export type PixelRange = '0-1' | '0-255';
export type ImageLayout = 'NCHW' | 'NHWC';

/** Per-channel statistics in R, G, B order, in the units of the chosen pixel range. */
export interface Normalization {
  readonly mean: readonly [number, number, number];
  readonly std: readonly [number, number, number];
}

export interface ImagePreprocessOptions {
  readonly width: number;
  readonly height: number;
  /** Shorter side is scaled to this first (then cropped); false resizes straight to width×height. */
  readonly resize: number | false;
  /** After `resize`, cut width×height from the centre; without it the image is squeezed to fit. */
  readonly centerCrop: boolean;
  readonly channels: ChannelOrder;
  readonly range: PixelRange;
  readonly normalize: Normalization | false;
  readonly layout: ImageLayout;
}

/**
 * Turns decoded pixels into a float32 batch of one ([1,3,H,W] or [1,H,W,3]). Resize and crop
 * are fused into one separable bilinear resample that computes only the pixels the crop keeps;
 * channel order, scaling and normalisation are applied as the output is written, because this
 * runs for every request.
 */
export function preprocessImage(
  image: DecodedImage,
  options: ImagePreprocessOptions,
): Tensor<'float32'> {
  const { width, height } = options;
  const { xFilter, yFilter } = resampling(image, options);
  const rows = resampleRows(image, xFilter, yFilter, channelMap(image.channels, options.channels));
  const { gain, bias } = channelAffine(options);

  const out = new Float32Array(3 * width * height);
  const planar = options.layout === 'NCHW';
  const plane = width * height;
  const rowLength = width * 3;
  const { start, count, weights, maxTaps } = yFilter;
  const source = rows.data;
  for (let y = 0; y < height; y++) {
    const first = (start[y]! - rows.firstRow) * rowLength;
    const taps = count[y]!;
    const w0 = y * maxTaps;
    for (let x = 0; x < width; x++) {
      const pixel = y * width + x;
      for (let c = 0; c < 3; c++) {
        let sum = 0;
        let at = first + x * 3 + c;
        for (let t = 0; t < taps; t++, at += rowLength) sum += weights[w0 + t]! * source[at]!;
        out[planar ? c * plane + pixel : pixel * 3 + c] = sum * gain[c]! + bias[c]!;
      }
    }
  }
  return new Tensor('float32', out, planar ? [1, 3, height, width] : [1, height, width, 3]);
}

/**
 * Per output index along one axis: the first source index, how many follow, and their weights
 * (row-major, `maxTaps` per output).
 */
interface AxisFilter {
  start: Int32Array;
  count: Int32Array;
  weights: Float64Array;
  maxTaps: number;
}

function resampling(
  image: DecodedImage,
  options: ImagePreprocessOptions,
): { xFilter: AxisFilter; yFilter: AxisFilter } {
  // The virtual resized image the output is cut from, and where the cut starts in it; sizes
  // and offsets are rounded the way torchvision's Resize and CenterCrop round them.
  let scaledWidth = options.width;
  let scaledHeight = options.height;
  let offsetX = 0;
  let offsetY = 0;
  if (options.resize !== false && options.centerCrop) {
    const shorter = Math.min(image.width, image.height);
    scaledWidth =
      image.width === shorter
        ? options.resize
        : Math.floor((options.resize * image.width) / shorter);
    scaledHeight =
      image.height === shorter
        ? options.resize
        : Math.floor((options.resize * image.height) / shorter);
    offsetX = roundHalfEven((scaledWidth - options.width) / 2);
    offsetY = roundHalfEven((scaledHeight - options.height) / 2);
  }
  return {
    xFilter: axisFilter(options.width, offsetX, image.width / scaledWidth, image.width),
    yFilter: axisFilter(options.height, offsetY, image.height / scaledHeight, image.height),
  };
}

/**
 * Triangle (bilinear) filter taps with half-pixel centres. When shrinking, the triangle widens
 * by the scale factor so every source pixel contributes (antialiasing, as Pillow and
 * torchvision do); when enlarging it is plain bilinear interpolation. Taps outside the image are
 * dropped and the rest renormalised, which clamps at the edges.
 */
function axisFilter(size: number, offset: number, scale: number, sourceSize: number): AxisFilter {
  const filterScale = Math.max(scale, 1);
  const support = filterScale;
  const maxTaps = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(size);
  const count = new Int32Array(size);
  const weights = new Float64Array(size * maxTaps);
  for (let i = 0; i < size; i++) {
    const center = (i + offset + 0.5) * scale;
    const lo = Math.max(0, Math.floor(center - support + 0.5));
    const hi = Math.min(sourceSize, Math.floor(center + support + 0.5));
    let total = 0;
    for (let j = lo; j < hi; j++) {
      const w = Math.max(0, 1 - Math.abs((j - center + 0.5) / filterScale));
      weights[i * maxTaps + j - lo] = w;
      total += w;
    }
    // A centre past the last pixel (possible only through rounding) takes the last pixel.
    if (total === 0) {
      start[i] = Math.min(Math.max(Math.floor(center), 0), sourceSize - 1);
      count[i] = 1;
      weights[i * maxTaps] = 1;
      continue;
    }
    for (let j = 0; j < hi - lo; j++) weights[i * maxTaps + j]! /= total;
    start[i] = lo;
    count[i] = hi - lo;
  }
  return { start, count, weights, maxTaps };
}

/** The horizontal pass over only the source rows the vertical pass reads: rows × width × 3. */
function resampleRows(
  image: DecodedImage,
  xFilter: AxisFilter,
  yFilter: AxisFilter,
  sourceChannel: readonly number[],
): { data: Float32Array; firstRow: number } {
  let firstRow = image.height;
  let endRow = 0;
  for (let y = 0; y < yFilter.start.length; y++) {
    firstRow = Math.min(firstRow, yFilter.start[y]!);
    endRow = Math.max(endRow, yFilter.start[y]! + yFilter.count[y]!);
  }
  const width = xFilter.start.length;
  const data = new Float32Array(Math.max(0, endRow - firstRow) * width * 3);
  const src = image.data;
  const channels = image.channels;
  const rowStride = image.width * channels;
  const [c0, c1, c2] = sourceChannel as [number, number, number];
  const { start, count, weights, maxTaps } = xFilter;
  let at = 0;
  for (let row = firstRow; row < endRow; row++) {
    const base = row * rowStride;
    for (let x = 0; x < width; x++) {
      const taps = count[x]!;
      const w0 = x * maxTaps;
      let p = base + start[x]! * channels;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      for (let t = 0; t < taps; t++, p += channels) {
        const w = weights[w0 + t]!;
        s0 += w * src[p + c0]!;
        s1 += w * src[p + c1]!;
        s2 += w * src[p + c2]!;
      }
      data[at++] = s0;
      data[at++] = s1;
      data[at++] = s2;
    }
  }
  return { data, firstRow };
}

/** Python's round(): halves go to the even neighbour. */
function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const fraction = value - floor;
  if (fraction !== 0.5) return Math.round(value);
  return floor % 2 === 0 ? floor : floor + 1;
}

/** Which source byte of a pixel feeds each output channel. */
function channelMap(sourceChannels: number, order: ChannelOrder): readonly number[] {
  if (sourceChannels < 3) return [0, 0, 0];
  return order === 'RGB' ? [0, 1, 2] : [2, 1, 0];
}

/** value × gain + bias per output channel: range scaling and normalisation folded together. */
function channelAffine(options: ImagePreprocessOptions): {
  gain: Float64Array;
  bias: Float64Array;
} {
  const scale = options.range === '0-1' ? 1 / 255 : 1;
  const colour = options.channels === 'RGB' ? [0, 1, 2] : [2, 1, 0];
  const gain = new Float64Array(3);
  const bias = new Float64Array(3);
  for (let c = 0; c < 3; c++) {
    const k = colour[c]!;
    const mean = options.normalize ? options.normalize.mean[k]! : 0;
    const std = options.normalize ? options.normalize.std[k]! : 1;
    gain[c] = scale / std;
    bias[c] = -mean / std;
  }
  return { gain, bias };
}
