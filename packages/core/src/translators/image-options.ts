import type { TensorDescriptor } from '../model/model.js';
import type { ImageDecodeLimits } from './image-decode.js';
import { DEFAULT_IMAGE_DECODE_LIMITS } from './image-decode.js';
import type {
  ImageLayout,
  ImagePreprocessOptions,
  Normalization,
  PixelRange,
} from './image-preprocess.js';
import type { SettingDeclaration } from '../settings/setting-declaration.js';
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

const SIDE = { type: 'integer', min: 1, max: MAX_SIDE } as const;

/** The image classification translator's arguments (serving.properties keys, DJL's names). */
export const IMAGE_CLASSIFICATION_ARGUMENTS: readonly SettingDeclaration[] = [
  { key: 'width', ...SIDE, default: `the model's input, else ${DEFAULT_SIZE}`, doc: 'crop width' },
  {
    key: 'height',
    ...SIDE,
    default: `the model's input, else ${DEFAULT_SIZE}`,
    doc: 'crop height',
  },
  {
    key: 'resize',
    ...SIDE,
    default: 'the longer crop side ÷ 0.875',
    doc: 'shorter side after resizing, or false for none',
  },
  { key: 'centerCrop', type: 'boolean', default: 'true', doc: 'crop the centre' },
  { key: 'channels', type: 'choice', values: ['RGB', 'BGR'], default: 'RGB', doc: 'order' },
  { key: 'range', type: 'choice', values: ['0-1', '0-255'], default: '0-1', doc: 'pixel units' },
  {
    key: 'normalize',
    type: 'string',
    default: 'ImageNet for 0-1 pixels',
    doc: 'true, false, or mean R,G,B then std R,G,B',
  },
  {
    key: 'layout',
    type: 'choice',
    values: ['NCHW', 'NHWC'],
    default: "the model's input, else NCHW",
    doc: 'tensor layout',
  },
  {
    key: 'maxResolutionInMP',
    type: 'integer',
    min: 1,
    max: 1000,
    default: String(DEFAULT_IMAGE_DECODE_LIMITS.maxResolutionInMP),
    doc: 'largest image decoded, megapixels',
  },
  {
    key: 'maxMemoryUsageInMB',
    type: 'integer',
    min: 1,
    max: 16384,
    default: String(DEFAULT_IMAGE_DECODE_LIMITS.maxMemoryUsageInMB),
    doc: 'memory a decode may use',
  },
  {
    key: 'applySoftmax',
    type: 'choice',
    values: ['auto', 'true', 'false'],
    default: 'auto',
    doc: 'turn outputs into probabilities',
  },
  { key: 'topK', type: 'integer', min: 1, max: 100_000, default: '5', doc: 'classes answered' },
  { key: 'synsetFileName', type: 'file', default: 'synset.txt', doc: 'labels file in the model' },
];

/**
 * Reads the image classification arguments (serving.properties keys). Size and layout default
 * to what the model's image input declares, so most models need no arguments at all.
 */
export function imageClassificationOptions(
  args: Readonly<Record<string, string>>,
  input?: TensorDescriptor,
): ImageClassificationOptions {
  const read = new TranslatorArguments(args, IMAGE_CLASSIFICATION_ARGUMENTS);
  const declared = declaredImageShape(input);
  const layout = read.oneOf<ImageLayout>('layout', undefined, declared.layout);
  const fromModel: Partial<DeclaredImageShape> = layout === declared.layout ? declared : {};
  const width = read.int('width', fromModel.width ?? DEFAULT_SIZE);
  const height = read.int('height', fromModel.height ?? DEFAULT_SIZE);
  const centerCrop = read.boolean('centerCrop', true);
  const resize = readResize(read, width, height, centerCrop);
  const range = read.oneOf<PixelRange>('range', undefined, '0-1');
  return {
    width,
    height,
    resize,
    centerCrop,
    channels: read.oneOf<'RGB' | 'BGR'>('channels', undefined, 'RGB'),
    range,
    normalize: readNormalization(read, range),
    layout,
    limits: {
      maxResolutionInMP: read.int(
        'maxResolutionInMP',
        DEFAULT_IMAGE_DECODE_LIMITS.maxResolutionInMP,
      ),
      maxMemoryUsageInMB: read.int(
        'maxMemoryUsageInMB',
        DEFAULT_IMAGE_DECODE_LIMITS.maxMemoryUsageInMB,
      ),
    },
    applySoftmax: readSoftmax(read),
    topK: read.int('topK', 5),
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
  const resize = read.int('resize', Math.round(Math.max(width, height) / CROP_FRACTION));
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
  const mode = read.oneOf<'auto' | 'true' | 'false'>('applySoftmax', undefined, 'auto');
  return mode === 'auto' ? 'auto' : mode === 'true';
}
