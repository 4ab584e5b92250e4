import { stat } from 'node:fs/promises';
import path from 'node:path';
import {
  ImageClassificationTranslator,
  type ImageInputExpectation,
  KilnError,
  KilnErrorCode,
  type Model,
  SERVING_DEFAULTS,
  type ServingProperties,
  type TensorDescriptor,
  formatDevice,
  formatShape,
  imageInputExpectation,
  inspectModelSource,
  isTranslatorPluginPath,
  loadModel,
  resolveTranslator,
  settingWarningLines,
} from '@kiln/core';
import type { EngineCatalog } from '@kiln/server';

/** Everything `kiln inspect` reports about a model. */
export interface ModelReport {
  readonly name: string;
  readonly version: string | undefined;
  /** The engine named or recognised; undefined when none is. */
  readonly engine: string | undefined;
  /** Why that engine: named in serving.properties/the URL, or recognised from the files. */
  readonly engineChoice: 'named' | 'recognised' | 'none';
  readonly location: string;
  readonly archive: string | undefined;
  readonly modelFile: string | undefined;
  readonly sizeBytes: number;
  readonly files: readonly { readonly path: string; readonly bytes: number }[];
  /** serving.properties as in force: the file under overrides, with defaults for what it leaves out. */
  readonly servingProperties: {
    readonly set: Readonly<Record<string, string>>;
    readonly defaults: Readonly<Record<string, string>>;
  };
  readonly translator: string;
  /**
   * serving.properties keys that do nothing as written (warnings), and values Kiln cannot
   * honour (errors: the model does not load).
   */
  readonly settings: { readonly warnings: readonly string[]; readonly errors: readonly string[] };
  /**
   * What an image model is fed: channel order, value range, mean/std (stated by the image
   * translator), or why nothing states them (a folder that looks like an image classifier
   * served raw). Undefined for other models and with --no-load.
   */
  readonly imageInput: ImageInputReport | undefined;
  /** What loading found; undefined with --no-load. */
  readonly loaded:
    | {
        readonly engineVersion: string;
        readonly device: string;
        readonly inputs: readonly TensorDescriptor[];
        readonly outputs: readonly TensorDescriptor[];
        /** Engine.describe(): backend, build, thread settings… */
        readonly engineReport: Record<string, unknown>;
        /** Model.describe(): file, options in force… */
        readonly modelReport: Record<string, unknown>;
        readonly loadMs: number;
      }
    | undefined;
}

export type ImageInputReport =
  | ({ readonly stated: true } & ImageInputExpectation)
  | { readonly stated: false; readonly note: string };

/** Files listed one by one in a report; larger models list the first ones. */
const LISTED_FILES = 200;

/**
 * Inspects a model without trusting anything: finds its files and settings, then (when
 * `load`) loads it with its engine and resolves its translator, exactly as serving would.
 */
export async function buildModelReport(
  url: string,
  engines: EngineCatalog,
  options: {
    overrides: Record<string, string>;
    load: boolean;
    /** Told each settings warning as soon as the files are read, before any load. */
    warn?: (line: string) => void;
  },
): Promise<ModelReport> {
  const inspection = await inspectModelSource(url, {
    registry: engines.registry,
    overrides: options.overrides,
  });
  const warnings = settingWarningLines(
    `serving.properties of ${inspection.name}`,
    inspection.settings,
  );
  for (const line of warnings) options.warn?.(line);
  const files = await Promise.all(
    inspection.files.slice(0, LISTED_FILES).map(async (file) => ({
      path: file,
      bytes: (await stat(path.join(inspection.dir, file))).size,
    })),
  );
  const report = {
    name: inspection.name,
    version: inspection.version,
    engine: inspection.engineName,
    engineChoice: inspection.properties.engine
      ? 'named'
      : inspection.engineName
        ? 'recognised'
        : 'none',
    location: inspection.dir,
    archive: inspection.archive,
    modelFile: inspection.modelFile,
    sizeBytes: inspection.sizeBytes,
    files,
    servingProperties: propertiesInForce(inspection.properties),
    translator: translatorName(inspection.properties),
    settings: { warnings, errors: inspection.settings.errors },
    imageInput: undefined,
    loaded: undefined,
  } satisfies ModelReport;
  if (!options.load) return report;
  if (inspection.engineName === undefined) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `no installed engine recognises the files of ${url} (${inspection.files.slice(0, 5).join(', ') || 'none'})`,
      {
        details: {
          hint: 'name the engine with engine= in serving.properties, or run kiln inspect --no-load to see the files',
        },
      },
    );
  }
  const started = performance.now();
  const model = await loadModel(url, { registry: engines.registry, overrides: options.overrides });
  try {
    const loadMs = performance.now() - started;
    // A translator that cannot be built (a broken plugin) fails here, as it would when serving.
    const translator = await resolveTranslator(model);
    const engine = await engines.registry.get(model.engine);
    const own = model.properties.translatorFactory ? undefined : ownTranslatorName(model);
    return {
      ...report,
      ...(own ? { translator: own } : {}),
      imageInput: own ? undefined : imageInputOf(translator, model, inspection.files),
      engine: model.engine,
      loaded: {
        engineVersion: engine.version,
        device: formatDevice(model.device),
        inputs: model.inputs,
        outputs: model.outputs,
        engineReport: engine.describe(),
        modelReport: model.describe(),
        loadMs,
      },
    };
  } finally {
    await model.dispose();
  }
}

/**
 * The image translator's channel order, range and statistics; for a model that looks like an
 * image classifier (a labels file, one image-shaped input) served as raw tensors, a note that
 * nothing states them, since the wrong channel order gives confident, wrong classes.
 */
function imageInputOf(
  translator: unknown,
  model: Model,
  files: readonly string[],
): ImageInputReport | undefined {
  if (translator instanceof ImageClassificationTranslator)
    return { stated: true, ...imageInputExpectation(translator.options) };
  const input = model.inputs.length === 1 ? model.inputs[0] : undefined;
  const shape = input?.shape;
  const imageShaped = shape?.length === 4 && (shape[1] === 3 || shape[3] === 3);
  const labels = files.find((file) => /^(synset|labels?|classes)\.txt$/i.test(file));
  if (!imageShaped || !labels) return undefined;
  return {
    stated: false,
    note: `the model looks like an image classifier (${labels}, input ${formatShape(shape)}) but takes raw tensors, so nothing states the channel order (RGB or BGR) and value range (0..1 or 0..255) it was trained on; serve it with translatorFactory=image-classification and channels, range and normalize as it was trained`,
  };
}

/** The keys set (file, overrides, URL) and Kiln's defaults for the batching keys left out. */
function propertiesInForce(properties: ServingProperties): ModelReport['servingProperties'] {
  const defaults: Record<string, string> = {
    // The server batches adaptively (auto_batch_size) when every input has a batch axis.
    batch_size: 'adaptive',
    max_batch_delay: String(SERVING_DEFAULTS.maxBatchDelayMs),
    job_queue_size: String(SERVING_DEFAULTS.jobQueueSize),
    max_idle_time: String(SERVING_DEFAULTS.maxIdleTimeS),
  };
  const set = Object.fromEntries(
    Object.entries(properties.raw).sort(([a], [b]) => a.localeCompare(b)),
  );
  for (const key of Object.keys(set)) delete defaults[key];
  return { set, defaults };
}

/**
 * What stands in for a translator when the engine serves whole requests (Python mode's serving
 * context): the request reaches the model as it arrived.
 */
function ownTranslatorName(model: Model): string | undefined {
  if (typeof model.newServingContext !== 'function') return undefined;
  return model.engine === 'Python'
    ? 'python (the request body reaches handle(inputs) as it arrived; its Output is the answer)'
    : `${model.engine}'s serving context (whole requests in, answers out)`;
}

function translatorName(properties: ServingProperties): string {
  const factory = properties.translatorFactory;
  if (factory)
    return isTranslatorPluginPath(factory) ? `${factory} (plugin in the model folder)` : factory;
  const application = properties.raw.application?.trim();
  return application ? `chosen by application=${application}` : 'raw (tensors in, tensors out)';
}
