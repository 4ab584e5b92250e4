import { carriedTensors } from './serving-parts.js';
import { describeTensorDescriptor } from './validate-inputs.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { Model } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { formatShape, shapeMatches } from '../tensor/shape.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import { StackBatchifier } from '../translate/stack-batchifier.js';
import type { Translator, TranslatorContext } from '../translate/translator.js';
import { classScores, readSynset, toProbabilities, topClassifications } from './classifications.js';
import { type DecodedImage, type ImageDecodeLimits, decodeImage } from './image-decode.js';
import { type ImageClassificationOptions, imageClassificationOptions } from './image-options.js';
import { preprocessImage } from './image-preprocess.js';

/**
 * DJL's image classification translator: a JPEG or PNG body (or a uint8 [H,W,C] pixel tensor)
 * becomes one preprocessed float32 image; the model's scores become the top-k classes as
 * `[{ className, probability }]`.
 */
export class ImageClassificationTranslator implements Translator<ServingInput, ServingOutput> {
  readonly batchifier = new StackBatchifier();

  constructor(
    readonly options: ImageClassificationOptions,
    /** Class names by index; classes past the end are named by their index. */
    readonly labels: readonly string[] = [],
  ) {}

  /** Options from the arguments and the model's image input; labels from the model folder. */
  static async forModel(
    model: Model,
    args: Readonly<Record<string, string>> = model.properties.raw,
  ): Promise<ImageClassificationTranslator> {
    if (model.inputs.length > 1) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `image classification needs a model with one image input; ${model.name} has ${model.inputs.length} (${model.inputs.map((d) => d.name).join(', ')})`,
      );
    }
    const options = imageClassificationOptions(args, model.inputs[0]);
    assertInputFits(model, options);
    return new ImageClassificationTranslator(
      options,
      await readSynset(model.modelDir, options.synsetFileName),
    );
  }

  processInput(ctx: TranslatorContext, input: ServingInput): NDList {
    const tensor = preprocessImage(imageOf(input, this.options.limits), this.options);
    const name = ctx.model.inputs[0]?.name;
    return NDList.of(name === undefined ? tensor : tensor.withName(name));
  }

  processOutput(_ctx: TranslatorContext, output: NDList): ServingOutput {
    if (output.length === 0) {
      throw new KilnError(KilnErrorCode.Internal, 'the model returned no output to classify');
    }
    const probabilities = toProbabilities(classScores(output.get(0)), this.options.applySoftmax);
    return {
      type: 'json',
      value: topClassifications(probabilities, this.options.topK, this.labels),
    };
  }
}

/** Fails at load time, not per request, when the model cannot take the tensor we would build. */
function assertInputFits(model: Model, options: ImageClassificationOptions): void {
  const input = model.inputs[0];
  if (!input) return;
  const { width, height, layout } = options;
  const shape = layout === 'NCHW' ? [1, 3, height, width] : [1, height, width, 3];
  // What the model leaves undeclared (TorchScript) it accepts as it comes.
  const dtypeFits = input.dtype === undefined || input.dtype === 'float32';
  const shapeFits = input.shape === undefined || shapeMatches(input.shape, shape);
  if (!dtypeFits || !shapeFits) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `model input ${describeTensorDescriptor(input)} does not take the float32${formatShape(shape)} the image translator makes; set width, height or layout to match`,
    );
  }
}

function imageOf(input: ServingInput, limits: ImageDecodeLimits): DecodedImage {
  if (input.body && input.body.length > 0)
    return decodeImage(input.body, boundedBy(limits, input.maxDecodedBytes));
  const tensors = carriedTensors(input);
  if (tensors) return pixelsOf(tensors);
  throw new KilnError(KilnErrorCode.InvalidInput, 'expected a JPEG or PNG image');
}

/** Image limits no looser than the request's decoded-size bound (4 bytes per RGBA pixel). */
function boundedBy(
  limits: ImageDecodeLimits,
  maxDecodedBytes: number | undefined,
): ImageDecodeLimits {
  if (maxDecodedBytes === undefined) return limits;
  return {
    maxResolutionInMP: Math.min(limits.maxResolutionInMP, maxDecodedBytes / 4 / 1e6),
    maxMemoryUsageInMB: Math.min(limits.maxMemoryUsageInMB, (2 * maxDecodedBytes) / 2 ** 20),
  };
}

/** An already-decoded image: one uint8 tensor [H,W,C] or [1,H,W,C] with 1, 3 or 4 channels. */
function pixelsOf(list: NDList): DecodedImage {
  const tensor = list.length === 1 ? list.get(0) : undefined;
  const shape = tensor?.rank === 4 && tensor.shape[0] === 1 ? tensor.shape.slice(1) : tensor?.shape;
  const [height = 0, width = 0, channels = 0] = shape ?? [];
  if (
    !tensor ||
    tensor.dtype !== 'uint8' ||
    shape?.length !== 3 ||
    ![1, 3, 4].includes(channels) ||
    width === 0 ||
    height === 0
  ) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `expected a JPEG or PNG image, or one uint8 [height,width,channels] tensor; got ${list.toString()}`,
    );
  }
  return { width, height, channels, data: tensor.data as Uint8Array };
}
