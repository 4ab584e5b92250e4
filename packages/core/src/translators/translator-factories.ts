import { KilnError, KilnErrorCode } from '../errors.js';
import type { Model } from '../model/model.js';
import type { ServingInput, ServingOutput } from '../translate/serving-io.js';
import type { Translator, TranslatorFactory } from '../translate/translator.js';
import type { ServingProperties } from '../loading/serving-properties.js';
import type { SettingDeclaration } from '../settings/setting-declaration.js';
import { ImageClassificationTranslator } from './image-classification.js';
import { IMAGE_CLASSIFICATION_ARGUMENTS } from './image-options.js';
import { RawTensorTranslator } from './raw-tensors.js';
import {
  assertTranslator,
  isTranslatorPluginPath,
  loadTranslatorPlugin,
} from './translator-plugin.js';

export type ServingTranslatorFactory = TranslatorFactory<ServingInput, ServingOutput>;

/** Tensors in, tensors out: the default. */
export class RawTensorTranslatorFactory implements ServingTranslatorFactory {
  readonly name = 'raw';
  readonly arguments: readonly SettingDeclaration[] = [];

  newInstance(): Translator<ServingInput, ServingOutput> {
    return new RawTensorTranslator();
  }
}

/** Images in, top-k classes out. */
export class ImageClassificationTranslatorFactory implements ServingTranslatorFactory {
  readonly name = 'image-classification';
  readonly arguments = IMAGE_CLASSIFICATION_ARGUMENTS;

  newInstance(
    model: Model,
    args: Readonly<Record<string, string>>,
  ): Promise<Translator<ServingInput, ServingOutput>> {
    return ImageClassificationTranslator.forModel(model, args);
  }
}

const BUILT_IN: readonly ServingTranslatorFactory[] = [
  new RawTensorTranslatorFactory(),
  new ImageClassificationTranslatorFactory(),
];

/** DJL's factory class names, so that DJL model folders work unchanged. */
const DJL_ALIASES: Readonly<Record<string, string>> = {
  'ai.djl.translate.NoopServingTranslatorFactory': 'raw',
  'ai.djl.modality.cv.translator.ImageClassificationTranslatorFactory': 'image-classification',
};

/** serving.properties `application` values that pick a built-in translator. */
const APPLICATIONS: Readonly<Record<string, string>> = {
  image_classification: 'image-classification',
  'cv/image_classification': 'image-classification',
};

/** Names `translatorFactory` accepts besides plugin paths. */
export function builtInTranslatorFactoryNames(): string[] {
  return [...BUILT_IN.map((f) => f.name), ...Object.keys(DJL_ALIASES)];
}

export function builtInTranslatorFactory(name: string): ServingTranslatorFactory | undefined {
  const canonical = DJL_ALIASES[name] ?? name;
  return BUILT_IN.find((f) => f.name === canonical);
}

/**
 * The arguments of the translator serving.properties picks, as its factory declares them;
 * undefined when it may read any key (a plugin, a factory Kiln does not know).
 */
export function declaredTranslatorArguments(
  properties: ServingProperties,
): readonly SettingDeclaration[] | undefined {
  const name = properties.translatorFactory?.trim();
  if (name && isTranslatorPluginPath(name)) return undefined;
  const application = properties.raw.application?.trim().toLowerCase() ?? '';
  return builtInTranslatorFactory(name || (APPLICATIONS[application] ?? 'raw'))?.arguments;
}

export interface ResolveTranslatorOptions {
  /** Translator arguments; default: every key of the model's serving.properties. */
  readonly arguments?: Readonly<Record<string, string>>;
  /** More factories to offer by name; they take precedence over built-ins of the same name. */
  readonly factories?: readonly ServingTranslatorFactory[];
}

/**
 * The translator a model's serving.properties asks for: `translatorFactory` names a built-in
 * factory (or its DJL class name) or a `.js`/`.mjs`/`.cjs` plugin inside the model folder;
 * without it, `application=image_classification` picks the image translator, and anything
 * else gets raw tensors.
 */
export async function resolveTranslator(
  model: Model,
  options: ResolveTranslatorOptions = {},
): Promise<Translator<ServingInput, ServingOutput>> {
  const args = options.arguments ?? model.properties.raw;
  const factory = await factoryFor(model, options.factories ?? []);
  let translator: unknown;
  try {
    translator = await factory.newInstance(model, args);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.ModelLoadFailed,
      `translator factory ${factory.name} failed`,
    );
  }
  return assertTranslator(translator, `translator factory ${factory.name}`);
}

async function factoryFor(
  model: Model,
  extra: readonly ServingTranslatorFactory[],
): Promise<ServingTranslatorFactory> {
  const name = model.properties.translatorFactory?.trim();
  if (!name) {
    const application = model.properties.raw.application?.trim().toLowerCase() ?? '';
    return builtInTranslatorFactory(APPLICATIONS[application] ?? 'raw')!;
  }
  if (isTranslatorPluginPath(name)) return loadTranslatorPlugin(model.modelDir, name);
  const factory = extra.find((f) => f.name === name) ?? builtInTranslatorFactory(name);
  if (!factory) {
    const known = [...extra.map((f) => f.name), ...builtInTranslatorFactoryNames()];
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `unknown translatorFactory ${JSON.stringify(name)}; use one of ${known.join(', ')}, or a .js/.mjs/.cjs plugin in the model folder`,
    );
  }
  return factory;
}
