import { stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { decodeTensors } from '../codecs/index.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { Model } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import { StackBatchifier } from '../translate/stack-batchifier.js';
import type { Translator, TranslatorFactory } from '../translate/translator.js';
import { ImageClassificationTranslator } from './image-classification.js';
import { resolveModelFile } from './model-relative-path.js';
import { RawTensorTranslator } from './raw-tensors.js';
import { validateInputs } from './validate-inputs.js';

/**
 * What a plugin receives as the third argument of `newInstance`. A module in a model folder
 * cannot count on resolving `@kiln/core` from there, and tensors must be Kiln's own classes.
 */
export const translatorPluginKit = Object.freeze({
  NDList,
  Tensor,
  KilnError,
  KilnErrorCode,
  StackBatchifier,
  decodeTensors,
  validateInputs,
  RawTensorTranslator,
  ImageClassificationTranslator,
});

export type TranslatorPluginKit = typeof translatorPluginKit;

const requireCache = createRequire(import.meta.url).cache;

/** The factory a plugin module exports (as `default` or as `translatorFactory`). */
export interface TranslatorPluginFactory {
  readonly name?: string;
  newInstance(
    model: Model,
    args: Readonly<Record<string, string>>,
    kit: TranslatorPluginKit,
  ): Promise<Translator<ServingInput, ServingOutput>> | Translator<ServingInput, ServingOutput>;
}

/** Is this `translatorFactory` value a plugin module path rather than a factory name? */
export function isTranslatorPluginPath(name: string): boolean {
  return /\.(m|c)?js$/i.test(name);
}

/**
 * Imports a translator plugin from the model folder (never from outside it). The module is
 * imported again when the file changes, so reloading a model picks up an edited plugin.
 */
export async function loadTranslatorPlugin(
  modelDir: string,
  relativePath: string,
): Promise<TranslatorFactory<ServingInput, ServingOutput>> {
  const file = await resolveModelFile(modelDir, relativePath, 'translator plugin');
  if (!file) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `translator plugin ${relativePath} does not exist in ${modelDir}`,
    );
  }
  const { mtimeMs, size } = await stat(file);
  // A new URL makes Node evaluate an ES module again; CommonJS ones are cached by path.
  const url = `${pathToFileURL(file).href}?v=${mtimeMs}-${size}`;
  delete requireCache[file];
  let module: Record<string, unknown>;
  try {
    module = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.InvalidConfig,
      `cannot load translator plugin ${relativePath}`,
    );
  }
  const plugin = pluginFactoryOf(module, relativePath);
  const name = typeof plugin.name === 'string' && plugin.name !== '' ? plugin.name : relativePath;
  return {
    name,
    newInstance: async (model, args) =>
      assertTranslator(
        await plugin.newInstance(model, args, translatorPluginKit),
        `translator plugin ${relativePath}`,
      ),
  };
}

function pluginFactoryOf(
  module: Record<string, unknown>,
  relativePath: string,
): TranslatorPluginFactory {
  const fallback = module.default as Record<string, unknown> | undefined;
  let candidate: unknown = module.translatorFactory ?? fallback?.translatorFactory ?? fallback;
  if (typeof candidate === 'function' && hasMethod(candidate.prototype, 'newInstance')) {
    candidate = new (candidate as new () => unknown)();
  }
  if (!hasMethod(candidate, 'newInstance')) {
    const exported = Object.keys(module).join(', ') || 'nothing';
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `translator plugin ${relativePath} must export a factory with a newInstance(model, args) method, as its default export or as \`translatorFactory\`; it exports ${exported}`,
    );
  }
  return candidate as TranslatorPluginFactory;
}

/** Checks what a factory returned, so a bad plugin fails at load time, not on a request. */
export function assertTranslator(
  value: unknown,
  source: string,
): Translator<ServingInput, ServingOutput> {
  const problems: string[] = [];
  if (!hasMethod(value, 'processInput')) problems.push('processInput(ctx, input) is missing');
  if (!hasMethod(value, 'processOutput'))
    problems.push('processOutput(ctx, output, input) is missing');
  const batchifier = (value as { batchifier?: unknown } | null)?.batchifier;
  if (batchifier === undefined) {
    problems.push(
      'batchifier is missing (null runs inputs one by one; kit.StackBatchifier stacks them)',
    );
  } else if (
    batchifier !== null &&
    !(hasMethod(batchifier, 'canBatch') && hasMethod(batchifier, 'batchify'))
  ) {
    problems.push('batchifier has no canBatch/batchify methods');
  }
  const prepare = (value as { prepare?: unknown } | null)?.prepare;
  if (prepare !== undefined && typeof prepare !== 'function')
    problems.push('prepare is not a function');
  if (problems.length > 0) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${source} returned an invalid translator: ${problems.join('; ')}`,
    );
  }
  return value as Translator<ServingInput, ServingOutput>;
}

function hasMethod(value: unknown, method: string): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as Record<string, unknown>)[method] === 'function'
  );
}
