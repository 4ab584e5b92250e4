import type {
  ChannelOrder,
  ImageLayout,
  ImagePreprocessOptions,
  Normalization,
  PixelRange,
} from './image-preprocess.js';

/**
 * Where a normalization's mean/std come from, when they are a known convention:
 * - `imagenet`: ImageNet's mean and std (torchvision, Keras "torch" mode): RGB-trained models;
 * - `imagenet-caffe`: ImageNet's mean with std 1 (Caffe, Keras "caffe" mode): BGR-trained models;
 * - `custom`: other statistics; `none`: pixels are only scaled.
 */
export type ImageStatistics = 'imagenet' | 'imagenet-caffe' | 'custom' | 'none';

/** What an image translator feeds its model, for people to check against how it was trained. */
export interface ImageInputExpectation {
  readonly channels: ChannelOrder;
  readonly range: PixelRange;
  /** In R, G, B order and the units of `range`, as the `normalize` key takes them. */
  readonly normalize: Normalization | false;
  readonly statistics: ImageStatistics;
  readonly layout: ImageLayout;
  readonly width: number;
  readonly height: number;
  /** Settings that disagree with the convention their statistics come from. */
  readonly warnings: readonly string[];
}

/** ImageNet's per-channel mean and std in 0..255 units, R, G, B. */
const IMAGENET_MEAN_255 = [123.675, 116.28, 103.53] as const;
const IMAGENET_STD_255 = [58.395, 57.12, 57.375] as const;
/** Caffe's published ImageNet mean (103.939, 116.779, 123.68 in its B, G, R order) is this close. */
const MEAN_TOLERANCE_255 = 1.5;

/** The channel order, value range and statistics `options` give an image model. */
export function imageInputExpectation(options: ImagePreprocessOptions): ImageInputExpectation {
  const { channels, range, normalize, layout, width, height } = options;
  const unit = range === '0-1' ? 255 : 1;
  const mean255 = normalize ? normalize.mean.map((m) => m * unit) : [];
  const std255 = normalize ? normalize.std.map((s) => s * unit) : [];
  const meanOrder = !normalize
    ? undefined
    : near(mean255, IMAGENET_MEAN_255, MEAN_TOLERANCE_255)
      ? 'RGB'
      : near(mean255, [...IMAGENET_MEAN_255].reverse(), MEAN_TOLERANCE_255)
        ? 'BGR'
        : undefined;
  const statistics: ImageStatistics = !normalize
    ? 'none'
    : meanOrder && near(std255, IMAGENET_STD_255, MEAN_TOLERANCE_255)
      ? 'imagenet'
      : meanOrder && near(std255, [1, 1, 1], 0.05)
        ? 'imagenet-caffe'
        : 'custom';

  const warnings: string[] = [];
  if (meanOrder === 'BGR') {
    warnings.push(
      `normalize lists the mean R,G,B; ${format(normalize && normalize.mean)} is ImageNet's in B,G,R order (write it R,G,B: ${format(IMAGENET_MEAN_255.map((m) => m / unit))})`,
    );
  }
  if (statistics === 'imagenet-caffe' && channels === 'RGB') {
    warnings.push(
      "the mean/std are Caffe's ImageNet ones (std 1), and Caffe-trained models take BGR pixels, but channels=RGB: set channels=BGR unless the model was trained on RGB",
    );
  }
  if (statistics === 'imagenet' && channels === 'BGR') {
    warnings.push(
      "the mean/std are ImageNet's in torchvision's form, for models trained on RGB pixels, but channels=BGR: set channels=RGB unless the model was trained on BGR",
    );
  }
  if (normalize && range === '0-1' && mean255.some((m) => m > 255 * 1.5)) {
    warnings.push(
      `the mean ${format(normalize.mean)} is in 0..255 units but range=0-1: set range=0-255, or give the mean in 0..1 units`,
    );
  }
  return { channels, range, normalize, statistics, layout, width, height, warnings };
}

function near(values: readonly number[], expected: readonly number[], tolerance: number): boolean {
  return (
    values.length === expected.length &&
    values.every((v, i) => Math.abs(v - expected[i]!) <= tolerance)
  );
}

function format(values: readonly number[] | false): string {
  return values ? values.map((v) => Number(v.toPrecision(6))).join(',') : '';
}
