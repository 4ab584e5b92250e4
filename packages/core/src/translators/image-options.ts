import type { TensorDescriptor } from '../model/model.js';
import type { ImageDecodeLimits } from './image-decode.js';
import { DEFAULT_IMAGE_DECODE_LIMITS } from './image-decode.js';
import type {
  ImageLayout,
  ImagePreprocessOptions,
  Normalization,
  PixelRange,
} from './image-preprocess.js';
import { TranslatorArguments } from './translator-arguments.js';

export type SoftmaxMode = boolean | 'auto';

export interface ImageClassificationOptions extends ImagePreprocessOptions {
  readonly limits: ImageDecodeLimits;
  /** true, false, or 'auto': applied unless the outputs already look like probabilities. */
  readonly applySoftmax: SoftmaxMode;
  readonly topK: number;
  /** Labels file inside the model folder (DJL's `synsetFileName`). */
  readonly synsetFileName: string;
}

/** ImageNet statistics for 0..1 pixels, in R, G, B order. */
export const IMAGENET_NORMALIZATION: Normalization = {
  mean: [0.485, 0.456, 0.406],
  std: [0.229, 0.224, 0.225],
};

const DEFAULT_SIZE = 224;
/** The usual crop keeps 87.5% of the shorter side: 224 from 256. */
const CROP_FRACTION = 0.875;
const MAX_SIDE = 8192;

/**
 * Reads the image classification arguments (serving.properties keys). Size and layout default
 * to what the model's image input declares, so most models need no arguments at all.
 */
export function imageClassificationOptions(
  args: Readonly<Record<string, string>>,
  input?: TensorDescriptor,
): ImageClassificationOptions {
  const read = new TranslatorArguments(args);
  const declared = declaredImageShape(input);
  const layout = read.oneOf<ImageLayout>('layout', ['NCHW', 'NHWC'], declared.layout);
  const fromModel: Partial<DeclaredImageShape> = layout === declared.layout ? declared : {};
  const width = read.int('width', fromModel.width ?? DEFAULT_SIZE, 1, MAX_SIDE);
  const height = read.int('height', fromModel.height ?? DEFAULT_SIZE, 1, MAX_SIDE);
  const centerCrop = read.boolean('centerCrop', true);
  const resize = readResize(read, width, height, centerCrop);
  const range = read.oneOf<PixelRange>('range', ['0-1', '0-255'], '0-1');
  return {
    width,
    height,
    resize,
    centerCrop,
    channels: read.oneOf('channels', ['RGB', 'BGR'], 'RGB'),
    range,
    normalize: readNormalization(read, range),
    layout,
    limits: {
      maxResolutionInMP: read.int(
        'maxResolutionInMP',
        DEFAULT_IMAGE_DECODE_LIMITS.maxResolutionInMP,
        1,
        1000,
      ),
      maxMemoryUsageInMB: read.int(
        'maxMemoryUsageInMB',
        DEFAULT_IMAGE_DECODE_LIMITS.maxMemoryUsageInMB,
        1,
        16384,
      ),
    },
    applySoftmax: readSoftmax(read),
    topK: read.int('topK', 5, 1, 100_000),
    synsetFileName: read.string('synsetFileName') ?? 'synset.txt',
  };
}

interface DeclaredImageShape {
  layout: ImageLayout;
  width?: number;
  height?: number;
}

/**
 * Layout and size from a rank-4 image input. NHWC is taken only when it is unambiguous
 * (3 channels last, not also 3 in the second place); dynamic (-1) sizes give no default.
 */
function declaredImageShape(input: TensorDescriptor | undefined): DeclaredImageShape {
  const shape = input?.shape;
  if (!shape || shape.length !== 4) return { layout: 'NCHW' };
  const nhwc = shape[3] === 3 && shape[1] !== 3;
  const [h, w] = nhwc ? [shape[1]!, shape[2]!] : [shape[2]!, shape[3]!];
  return {
    layout: nhwc ? 'NHWC' : 'NCHW',
    ...(h > 0 ? { height: h } : {}),
    ...(w > 0 ? { width: w } : {}),
  };
}

function readResize(
  read: TranslatorArguments,
  width: number,
  height: number,
  centerCrop: boolean,
): number | false {
  const text = read.string('resize');
  if (text?.toLowerCase() === 'false') return false;
  const resize = read.int(
    'resize',
    Math.round(Math.max(width, height) / CROP_FRACTION),
    1,
    MAX_SIDE,
  );
  // A crop larger than the resized image would have to invent pixels.
  if (centerCrop && resize < Math.max(width, height)) {
    throw read.invalid(
      'resize',
      `false or at least ${Math.max(width, height)} (the crop is ${width}×${height})`,
    );
  }
  return resize;
}

/**
 * `true` is ImageNet's statistics in the units of `range`; six numbers are mean R,G,B then
 * std R,G,B (DJL's form). Default: ImageNet for 0..1 pixels, none for 0..255 pixels.
 */
function readNormalization(read: TranslatorArguments, range: PixelRange): Normalization | false {
  const text = read.string('normalize');
  const unit = range === '0-1' ? 1 : 255;
  if (text === undefined) return range === '0-1' ? IMAGENET_NORMALIZATION : false;
  if (text.toLowerCase() === 'false') return false;
  if (text.toLowerCase() === 'true') {
    const { mean, std } = IMAGENET_NORMALIZATION;
    return { mean: scale3(mean, unit), std: scale3(std, unit) };
  }
  const values = text.split(',').map((v) => Number(v.trim()));
  if (
    values.length !== 6 ||
    values.some((v) => !Number.isFinite(v)) ||
    values.slice(3).some((v) => v <= 0)
  ) {
    throw read.invalid(
      'normalize',
      'true, false, or six numbers: mean R,G,B then std R,G,B (std > 0)',
    );
  }
  return { mean: [values[0]!, values[1]!, values[2]!], std: [values[3]!, values[4]!, values[5]!] };
}

function scale3(
  values: readonly [number, number, number],
  factor: number,
): [number, number, number] {
  return [values[0] * factor, values[1] * factor, values[2] * factor];
}

function readSoftmax(read: TranslatorArguments): SoftmaxMode {
  const mode = read.oneOf('applySoftmax', ['auto', 'true', 'false'], 'auto');
  return mode === 'auto' ? 'auto' : mode === 'true';
}
