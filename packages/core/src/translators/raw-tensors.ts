import { decodeTensors } from '../codecs/index.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { TensorDescriptor } from '../model/model.js';
import type { NDList } from '../tensor/ndlist.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import { StackBatchifier } from '../translate/stack-batchifier.js';
import type { Translator, TranslatorContext } from '../translate/translator.js';
import { carriedTensors } from './serving-parts.js';
import { validateInputs } from './validate-inputs.js';

export interface RawTensorTranslatorOptions {
  /** Largest body decoded, in bytes; the codecs' own limit applies when unset. */
  readonly maxBytes?: number;
}

/**
 * Tensors in, tensors out (DJL's NoopServingTranslator): the body is decoded by its format
 * (npy, npz, safetensors, DJL ndlist, JSON), checked against the model's inputs, and the
 * outputs are returned named after the model's outputs.
 */
export class RawTensorTranslator implements Translator<ServingInput, ServingOutput> {
  readonly batchifier = new StackBatchifier();

  constructor(private readonly options: RawTensorTranslatorOptions = {}) {}

  processInput(ctx: TranslatorContext, input: ServingInput): NDList {
    return validateInputs(this.tensorsOf(input), ctx.model.inputs);
  }

  processOutput(ctx: TranslatorContext, output: NDList): ServingOutput {
    return { type: 'tensors', tensors: nameOutputs(output, ctx.model.outputs) };
  }

  private tensorsOf(input: ServingInput): NDList {
    const maxBytes = smallestLimit(this.options.maxBytes, input.maxDecodedBytes);
    const carried = carriedTensors(input, maxBytes);
    if (carried) return carried;
    if (!input.body || input.body.length === 0) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        'the request carries no tensors (empty body)',
      );
    }
    return decodeTensors(input.body, {
      ...(input.contentType === undefined ? {} : { contentType: input.contentType }),
      ...(maxBytes === undefined ? {} : { maxBytes }),
    });
  }
}

function smallestLimit(...limits: (number | undefined)[]): number | undefined {
  const set = limits.filter((l): l is number => l !== undefined);
  return set.length === 0 ? undefined : Math.min(...set);
}

/** Gives unnamed outputs the names the model declares for their positions. */
export function nameOutputs(output: NDList, descriptors: readonly TensorDescriptor[]): NDList {
  return output.map((tensor, i) => {
    const name = descriptors[i]?.name;
    return tensor.name || name === undefined ? tensor : tensor.withName(name);
  });
}
