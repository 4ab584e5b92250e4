import { KilnError, KilnErrorCode } from '../errors.js';
import type { EngineProvider } from './engine.js';
import { EngineRegistry } from './engine-registry.js';

/** Engines known to a process: their providers, and the modules they came from. */
export interface EngineCatalog {
  readonly registry: EngineRegistry;
  /** Module specifiers that export a provider, for worker threads to import the same engines. */
  readonly modules: readonly string[];
  /** Modules that could not be imported, with why (an engine package not installed). */
  readonly missing: Readonly<Record<string, string>>;
  providerFor(engineName: string): EngineProvider | undefined;
  /** The module an engine's provider came from. */
  moduleFor(engineName: string): string | undefined;
}

/**
 * The engine packages Kiln serves with when they are installed, by their light `/provider`
 * entry: a few small modules each, the engine itself imported when a model first needs it.
 */
export const DEFAULT_ENGINE_MODULES = [
  '@kiln/engine-onnxruntime/provider',
  '@kiln/engine-libtorch/provider',
  '@kiln/engine-tensorflow/provider',
  '@kiln/engine-dlr/provider',
  '@kiln/engine-python/provider',
] as const;

/**
 * Imports each engine module (a package name or a file URL exporting `provider` or a default
 * provider) and registers its provider. Importing loads nothing native: engines load when a
 * model first needs them. Modules that fail to import are listed in `missing`.
 */
export async function loadEngineCatalog(modules: readonly string[]): Promise<EngineCatalog> {
  const registry = new EngineRegistry();
  const loaded: string[] = [];
  const missing: Record<string, string> = {};
  const providers = new Map<string, EngineProvider>();
  const sources = new Map<string, string>();
  // Imported together (their file reads overlap), registered in the order given.
  const imported = await Promise.allSettled(modules.map((m) => importEngineProvider(m)));
  imported.forEach((result, i) => {
    const specifier = modules[i]!;
    if (result.status === 'rejected') {
      missing[specifier] = reasonOf(result.reason);
      return;
    }
    const provider = result.value;
    try {
      registry.register(provider);
    } catch (error) {
      missing[specifier] = reasonOf(error);
      return;
    }
    providers.set(provider.name.toLowerCase(), provider);
    sources.set(provider.name.toLowerCase(), specifier);
    loaded.push(specifier);
  });
  return {
    registry,
    modules: loaded,
    missing,
    providerFor: (name) => providers.get(name.toLowerCase()),
    moduleFor: (name) => sources.get(name.toLowerCase()),
  };
}

/** The provider a module exports as `provider` or as its default export. */
export async function importEngineProvider(specifier: string): Promise<EngineProvider> {
  const module = (await import(specifier)) as {
    provider?: EngineProvider;
    default?: EngineProvider;
  };
  const provider = module.provider ?? module.default;
  if (!provider || typeof provider.load !== 'function') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `engine module ${specifier} exports no provider (as \`provider\` or default)`,
    );
  }
  return provider;
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
