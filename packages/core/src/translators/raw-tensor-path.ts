import type { Translator, TranslatorContext } from '../translate/translator.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import type { NDList } from '../tensor/ndlist.js';
import { RawTensorTranslator } from './raw-tensors.js';

/**
 * Gives a model's translator a tensors-in, tensors-out path for inputs marked `rawTensors`
 * (v2 protocol requests), so one worker serves both its own translator's requests and raw
 * tensor requests, in the same batches when their tensors fit together.
 */
export function withRawTensorPath(
  translator: Translator<ServingInput, ServingOutput>,
): Translator<ServingInput, ServingOutput> {
  if (translator instanceof RawTensorTranslator) return translator;
  const raw = new RawTensorTranslator();
  return {
    batchifier: translator.batchifier,
    ...(translator.prepare
      ? { prepare: (ctx: TranslatorContext) => translator.prepare!(ctx) }
      : {}),
    processInput: (ctx: TranslatorContext, input: ServingInput) =>
      input.rawTensors ? raw.processInput(ctx, input) : translator.processInput(ctx, input),
    processOutput: (ctx: TranslatorContext, output: NDList, input: ServingInput) =>
      input.rawTensors
        ? raw.processOutput(ctx, output)
        : translator.processOutput(ctx, output, input),
  };
}
