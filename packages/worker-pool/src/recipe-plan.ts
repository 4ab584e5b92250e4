import {
  DEFAULT_ENGINE_MODULES,
  type EngineCatalog,
  type EngineProvider,
  KilnError,
  KilnErrorCode,
  type Model,
  type ServingInput,
  type ServingOutput,
  type Translator,
  type TranslatorFactory,
  type WorkerKind,
  assertTranslator,
  chooseEngine,
  loadEngineCatalog,
  type ResolvedModelLoad,
  loadResolvedModel,
  resolveModelLoad,
  resolveTranslator,
  withRawTensorPath,
  workerKindFor,
} from '@kiln/core';
import { withConfiguredBatchifier } from './serving-translator.js';
import type { ModelRecipe, ResolvedRecipe } from './worker-protocol.js';

/** How a pool runs a recipe's model, decided by its engine's provider. */
export type PlannedRecipe =
  | {
      /** An async engine: loaded once here, its workers share it on this thread. */
      readonly kind: 'shared';
      readonly workerKind: WorkerKind;
      readonly model: Model;
      readonly translator: Translator<ServingInput, ServingOutput>;
    }
  | {
      /** A blocking engine, or step workers: each loads the resolved recipe on a host thread. */
      readonly kind: 'threads';
      readonly workerKind: WorkerKind;
      readonly recipe: ResolvedRecipe;
      /** The engine's name when it loads in one thread per process: its workers share one. */
      readonly sharedHost: string | undefined;
      /** Its provider's name: the engine may also run inline on the calling thread. */
      readonly engineName: string | undefined;
      /**
       * How long a worker may take to start, for an engine that declares DJL's
       * `model_loading_timeout` (Python mode): set or declared, in ms.
       */
      readonly loadTimeoutMs: number | undefined;
    };

/**
 * Locates the model once (archives unpacked, properties merged, engine picked) and decides
 * where it runs. Blocking engines are not loaded on this thread: their workers load them.
 */
export async function planRecipe(
  recipe: ModelRecipe,
  onLocated?: () => void,
): Promise<PlannedRecipe> {
  const catalog = await engineCatalogFor(recipe.engines);
  const { registry, providerFor } = catalog;
  const load = await resolveModelLoad(recipe.url, {
    registry,
    ...(recipe.overrides ? { overrides: recipe.overrides } : {}),
    ...(recipe.cacheDir === undefined ? {} : { cacheDir: recipe.cacheDir }),
    ...(recipe.maxArchiveBytes === undefined ? {} : { maxArchiveBytes: recipe.maxArchiveBytes }),
  });
  onLocated?.();
  const provider = load.engineName === undefined ? undefined : providerFor(load.engineName);
  // What its workers run, as its engine declares and serving.properties picks.
  const workerKind = workerKindFor(
    provider ?? { name: load.engineName ?? 'its engine', workerKinds: undefined },
    load.request.properties,
  );
  // A step worker keeps its samplers and detokenizers on a thread of its own, whatever runs
  // the model (an async engine's process too).
  if (provider?.execution === 'async' && workerKind !== 'step') {
    const model = await loadResolvedModel(load, registry);
    try {
      const translator = await servingTranslator(model, recipe.translator);
      return { kind: 'shared', workerKind, model, translator };
    } catch (error) {
      await model.dispose();
      throw error;
    }
  }
  return {
    kind: 'threads',
    workerKind,
    recipe: {
      load,
      engines: enginesFor(load, catalog) ?? recipe.engines,
      translator: recipe.translator,
    },
    sharedHost: provider?.hostThread === 'shared' ? provider.name : undefined,
    engineName: provider?.name,
    loadTimeoutMs: declaredLoadTimeoutMs(provider, load.request.options),
  };
}

/** `option.model_loading_timeout` (seconds, or its declared default), for engines declaring it. */
function declaredLoadTimeoutMs(
  provider: EngineProvider | undefined,
  options: Readonly<Record<string, string>>,
): number | undefined {
  const declared = provider?.options?.find((o) => o.key === 'model_loading_timeout');
  if (!declared) return undefined;
  const seconds = Number(options.model_loading_timeout ?? declared.default);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined;
}

/**
 * Loads a blocking engine's resolved recipe on this thread, for a worker that runs inline
 * (placement `inline`, or `auto` for a model the probe found small).
 */
export async function loadRecipeHere(
  recipe: ResolvedRecipe,
  intraOpThreads: number | undefined,
): Promise<{ model: Model; translator: Translator<ServingInput, ServingOutput> }> {
  const { registry } = await engineCatalogFor(recipe.engines);
  const { load } = recipe;
  const model = await loadResolvedModel(
    intraOpThreads === undefined ? load : { ...load, request: { ...load.request, intraOpThreads } },
    registry,
  );
  try {
    const translator = await servingTranslator(model, recipe.translator);
    return { model, translator };
  } catch (error) {
    await model.dispose();
    throw error;
  }
}

/**
 * Loads the engine a local model folder would run on, as planRecipe picks it and a host thread
 * then loads it (the same catalog, so the worker that comes finds it loaded): a host thread
 * started ahead of its worker does this while the server is still starting. Nothing is cached
 * but the engine: the worker locates the model again, with the server's settings.
 */
export async function preloadEngineFor(
  folder: string,
  engineModules: readonly string[] = DEFAULT_ENGINE_MODULES,
): Promise<void> {
  const catalog = await engineCatalogFor(engineModules);
  const load = await resolveModelLoad(folder, { registry: catalog.registry });
  const modules = enginesFor(load, catalog);
  if (modules === undefined) return;
  const { registry } = await engineCatalogFor(modules);
  await chooseEngine(registry, load.request.properties, load.files, load.request.name);
}

/**
 * The engine modules a worker thread needs: the named engine's, or those of every engine that
 * recognises the files (its fallbacks, as loadModel would try them); undefined for all.
 */
function enginesFor(load: ResolvedModelLoad, catalog: EngineCatalog): string[] | undefined {
  const named = load.request.properties.engine;
  const providers = named
    ? [catalog.providerFor(named)]
    : catalog.registry.providers().filter((p) => p.recognizes(load.files));
  const modules = providers.map((p) => p && catalog.moduleFor(p.name));
  if (modules.length === 0 || modules.some((m) => m === undefined)) return undefined;
  return modules as string[];
}

const catalogs = new Map<string, Promise<EngineCatalog>>();

/** The engines of a recipe, imported once per thread; fails when none could be imported. */
export function engineCatalogFor(modules: readonly string[]): Promise<EngineCatalog> {
  const key = modules.join('\n');
  let catalog = catalogs.get(key);
  if (!catalog) {
    catalog = loadEngineCatalog(modules).then((loaded) => {
      const failed = Object.entries(loaded.missing);
      if (failed.length > 0 && loaded.modules.length === 0) {
        throw new KilnError(
          KilnErrorCode.EngineUnavailable,
          `no engine module could be imported: ${failed.map(([m, why]) => `${m}: ${why}`).join('; ')}`,
        );
      }
      return loaded;
    });
    catalog.catch(() => catalogs.delete(key));
    catalogs.set(key, catalog);
  }
  return catalog;
}

/**
 * The translator a pool's worker runs: the recipe's (below), also answering raw tensor and v2
 * requests, batching as serving.properties' `batchifier` asks.
 */
export async function servingTranslator(
  model: Model,
  specifier: string | undefined,
): Promise<Translator<ServingInput, ServingOutput>> {
  return withConfiguredBatchifier(
    withRawTensorPath(await recipeTranslator(model, specifier)),
    model,
  );
}

/** The recipe's translator module (exporting `translatorFactory`), else serving.properties'. */
export async function recipeTranslator(
  model: Model,
  specifier: string | undefined,
): Promise<Translator<ServingInput, ServingOutput>> {
  if (specifier === undefined) return resolveTranslator(model);
  const module = (await import(specifier)) as {
    translatorFactory?: TranslatorFactory<ServingInput, ServingOutput>;
  };
  if (typeof module.translatorFactory?.newInstance !== 'function') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `translator module ${specifier} exports no translatorFactory`,
    );
  }
  return assertTranslator(
    await module.translatorFactory.newInstance(model, model.properties.raw),
    `translator module ${specifier}`,
  );
}
