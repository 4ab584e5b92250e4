import path from 'node:path';
import { CPU, formatDevice, parseDevice, type Device } from '../engine/device.js';
import type { Engine } from '../engine/engine.js';
import type { EngineRegistry } from '../engine/engine-registry.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { Model, ModelLoadRequest } from '../model/model.js';
import type { SettingsCheck } from '../settings/settings-check.js';
import { declaredTranslatorArguments } from '../translators/translator-factories.js';
import { checkModelSettings, settingsRefusal } from './model-settings.js';
import {
  resolveModelSource,
  stripModelExtension,
  type ModelSource,
  type ResolveModelSourceOptions,
} from './model-source.js';
import { resolveModelIdSource } from './model-id.js';
import { parseModelUrl, type ModelUrl } from './model-url.js';
import {
  mergeServingProperties,
  readServingProperties,
  servingPropertiesFrom,
  type ServingProperties,
} from './serving-properties.js';

export interface ModelSourceOptions extends ResolveModelSourceOptions {
  /**
   * serving.properties keys (`batch_size`, `option.intraOpNumThreads`…) that win over the
   * model's own file. Fields of the model URL win over both.
   */
  overrides?: Readonly<Record<string, string>>;
  /**
   * The folder every file of the model must resolve into (a client registration's model
   * store): `option.model_id` may name no folder outside it.
   */
  root?: string;
}

export interface LoadModelOptions extends ModelSourceOptions {
  /** Engines to load with; the model's engine is named or recognised among them. */
  registry: EngineRegistry;
  /** Device when the model URL names none; wins over `load_on_devices`. */
  device?: Device | string;
}

export interface InspectModelOptions extends ModelSourceOptions {
  /** Providers asked to recognise the files when no engine is named; none is loaded. */
  registry?: EngineRegistry;
}

/** What a model source holds, found without loading any engine. */
export interface ModelInspection {
  readonly name: string;
  readonly version: string | undefined;
  readonly dir: string;
  readonly modelFile: string | undefined;
  readonly files: string[];
  readonly sizeBytes: number;
  readonly archive: string | undefined;
  /** serving.properties merged with overrides and the URL's fields. */
  readonly properties: ServingProperties;
  /** True when `option.model_id` moved `dir` away from the folder the URL names. */
  readonly fromModelId: boolean;
  /** The engine named, or the first registered provider that recognises the files. */
  readonly engineName: string | undefined;
  /**
   * Keys nothing reads or Kiln does not implement (warnings), and values it cannot honour
   * (errors: loading the model fails with them).
   */
  readonly settings: SettingsCheck;
}

/**
 * A model located on disk, its properties merged and its engine picked, as plain data that
 * crosses threads: a worker loads it with `loadResolvedModel` without locating it again.
 */
export interface ResolvedModelLoad {
  /** What the engine is asked to load; the device is chosen once the engine is loaded. */
  readonly request: Omit<ModelLoadRequest, 'device'>;
  /** The engine named, or the best registered provider that recognises the files. */
  readonly engineName: string | undefined;
  /** The model folder's files, for engine recognition where no engine is named. */
  readonly files: readonly string[];
  /** The device choice (`gpu0`, `*`, `cpu;gpu0`), or undefined for cpu. */
  readonly device: string | undefined;
}

/**
 * Loads a model from a DJL-style URL (`[name[:version[:engine[:device]]]]=url`): finds the
 * files (extracting archives), reads serving.properties under overrides and the URL's
 * fields, picks the engine (named, or recognised from the files) and the device, and asks
 * the engine to load it. Engine failures become MODEL_LOAD_FAILED naming the model.
 */
export async function loadModel(
  spec: string | ModelUrl,
  options: LoadModelOptions,
): Promise<Model> {
  return loadResolvedModel(await resolveModelLoad(spec, options), options.registry);
}

/** The first half of loadModel: everything up to loading an engine, which it leaves alone. */
export async function resolveModelLoad(
  spec: string | ModelUrl,
  options: ModelSourceOptions & { registry?: EngineRegistry; device?: Device | string },
): Promise<ResolvedModelLoad> {
  const prepared = await prepareModel(spec, options, options.registry);
  const { url, source, name } = prepared;
  const { properties, engineName } = await withEngine(prepared, options.registry);
  const device = url.device ?? options.device ?? properties.loadOnDevices;
  const refusal = settingsRefusal(
    name,
    checkSettingsOf(properties, source.dir, engineName, options.registry),
  );
  if (refusal) throw refusal;
  return {
    request: {
      name,
      modelDir: source.dir,
      ...(source.modelFile === undefined ? {} : { modelFile: source.modelFile }),
      options: properties.options,
      properties,
    },
    engineName,
    files: source.files,
    device: typeof device === 'string' || device === undefined ? device : formatDevice(device),
  };
}

/** The second half of loadModel: loads the engine in this thread, then the model with it. */
export async function loadResolvedModel(
  resolved: ResolvedModelLoad,
  registry: EngineRegistry,
): Promise<Model> {
  const { request: located } = resolved;
  const name = located.name;
  const engine = await chooseEngine(registry, located.properties, resolved.files, name);
  const device = chooseDevice(resolved.device, engine);
  if (!engine.devices().some((d) => d.type === device.type && d.id === device.id)) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `model ${name}: engine ${engine.name} cannot use ${formatDevice(device)} here (it offers ${engine.devices().map(formatDevice).join(', ')})`,
      { details: { model: name, engine: engine.name, device: formatDevice(device) } },
    );
  }
  const request: ModelLoadRequest = { ...located, device };
  try {
    return await engine.loadModel(request);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `model ${name} failed to load on ${engine.name} (${formatDevice(device)}): ${reason}`,
      {
        cause: error,
        details: {
          model: name,
          engine: engine.name,
          device: formatDevice(device),
          ...(error instanceof KilnError ? { causeCode: error.code } : {}),
        },
      },
    );
  }
}

/** Everything loadModel would use, for listing and archiving tools; loads no engine. */
export async function inspectModelSource(
  spec: string | ModelUrl,
  options: InspectModelOptions = {},
): Promise<ModelInspection> {
  const prepared = await prepareModel(spec, options, options.registry);
  const { source, name, version, fromModelId } = prepared;
  const { properties, engineName } = await withEngine(prepared, options.registry);
  return {
    name,
    version,
    dir: source.dir,
    modelFile: source.modelFile,
    files: source.files,
    sizeBytes: source.sizeBytes,
    archive: source.archive,
    properties,
    fromModelId,
    engineName,
    settings: checkSettingsOf(properties, source.dir, engineName, options.registry),
  };
}

/**
 * The engine named, or the first registered provider that recognises the files, and the
 * properties with what that engine reads off the files laid under them.
 */
async function withEngine(
  { properties, source }: PreparedModel,
  registry: EngineRegistry | undefined,
): Promise<{ properties: ServingProperties; engineName: string | undefined }> {
  const providers = registry?.providers() ?? [];
  const engineName = properties.engine ?? providers.find((p) => p.recognizes(source.files))?.name;
  const provider = providers.find((p) => p.name.toLowerCase() === engineName?.toLowerCase());
  const implied = await provider?.impliedSettings?.(source.dir, source.files);
  if (implied === undefined || Object.keys(implied).length === 0) return { properties, engineName };
  return {
    properties: mergeServingProperties(servingPropertiesFrom(implied), properties.raw),
    engineName,
  };
}

/** The settings check of a model read by `engineName` (when known) among the registry's engines. */
function checkSettingsOf(
  properties: ServingProperties,
  modelDir: string,
  engineName: string | undefined,
  registry: EngineRegistry | undefined,
): SettingsCheck {
  const providers = registry?.providers() ?? [];
  const engine = providers.find((p) => p.name.toLowerCase() === engineName?.toLowerCase());
  return checkModelSettings(properties, {
    engine,
    providers,
    translatorArguments: declaredTranslatorArguments(properties),
    modelDir,
  });
}

interface PreparedModel {
  readonly url: ModelUrl;
  readonly source: ModelSource;
  readonly properties: ServingProperties;
  readonly name: string;
  readonly version: string | undefined;
  readonly fromModelId: boolean;
}

async function prepareModel(
  spec: string | ModelUrl,
  options: ModelSourceOptions,
  registry: EngineRegistry | undefined,
): Promise<PreparedModel> {
  const url = typeof spec === 'string' ? parseModelUrl(spec) : spec;
  const sourceOptions = {
    cacheDir: options.cacheDir,
    maxArchiveBytes: options.maxArchiveBytes,
    maxArchiveEntries: options.maxArchiveEntries,
  };
  const named = await resolveModelSource(url.url, sourceOptions);
  // The URL's fields are written as the properties they stand for, so the model's
  // properties show what is in force.
  const properties = mergeServingProperties(
    await readServingProperties(named.dir),
    options.overrides,
    {
      name: url.name,
      version: url.version,
      engine: url.engine,
      load_on_devices: url.device,
    },
  );
  const name =
    setting(properties.raw, 'name') ??
    setting(properties.raw, 'model_name') ??
    defaultModelName(named);
  const modelId = properties.options.model_id?.trim();
  const fromModelId = !!modelId && !handlerReadsModelId(properties, named.files, registry);
  const source = fromModelId
    ? await resolveModelIdSource(named.dir, modelId, { ...sourceOptions, root: options.root })
    : named;
  return {
    url,
    source,
    properties,
    name,
    version: setting(properties.raw, 'version'),
    fromModelId,
  };
}

/**
 * Whether the model's own code gets `option.model_id` (Python mode's handler, as DJL's
 * handlers read it): its files then stay where the URL points.
 */
function handlerReadsModelId(
  properties: ServingProperties,
  files: readonly string[],
  registry: EngineRegistry | undefined,
): boolean {
  const providers = registry?.providers() ?? [];
  const named = properties.engine?.toLowerCase();
  const engine =
    named === undefined
      ? providers.find((p) => p.recognizes(files))
      : providers.find((p) => p.name.toLowerCase() === named);
  return engine?.passesSettingsToModel === true;
}

function setting(raw: Readonly<Record<string, string>>, key: string): string | undefined {
  return (Object.hasOwn(raw, key) ? raw[key]?.trim() : undefined) || undefined;
}

/** The archive's or model file's name without extension, else the folder's name. */
function defaultModelName(source: ModelSource): string {
  if (source.archive !== undefined) return stripModelExtension(source.archive);
  if (source.modelFile !== undefined) return stripModelExtension(source.modelFile);
  return path.basename(source.dir);
}

/**
 * The engine a located model loads on: the one its properties name (`engine=`), else the best
 * available one that recognizes its files.
 */
export async function chooseEngine(
  registry: EngineRegistry,
  properties: ServingProperties,
  files: readonly string[],
  name: string,
): Promise<Engine> {
  try {
    return properties.engine !== undefined
      ? await registry.get(properties.engine)
      : await registry.forModelFiles(files);
  } catch (error) {
    const reason = KilnError.wrap(error, KilnErrorCode.EngineUnavailable);
    throw new KilnError(reason.code, `model ${name}: ${reason.message}`, {
      cause: error,
      details: reason.details,
    });
  }
}

/**
 * The first device of a choice (`gpu0`, `cpu`, `gpu0;gpu1`, or `*` for any), defaulting to
 * cpu; `*` takes the engine's first gpu when it has one.
 */
function chooseDevice(choice: Device | string | undefined, engine: Engine): Device {
  if (choice === undefined) return CPU;
  if (typeof choice !== 'string') return choice;
  const first = choice
    .split(/[;,]/)
    .map((part) => part.trim())
    .find((part) => part !== '');
  if (first === undefined) return CPU;
  if (first === '*') return engine.devices().find((d) => d.type === 'gpu') ?? CPU;
  return parseDevice(first);
}
