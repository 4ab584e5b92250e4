import { EngineRegistry, type EngineProvider, KilnError, KilnErrorCode } from '@kiln/core';

/** Engine packages the server serves with when they are installed. */
export const DEFAULT_ENGINE_MODULES = [
  '@kiln/engine-onnxruntime',
  '@kiln/engine-libtorch',
  '@kiln/engine-tensorflow',
  '@kiln/engine-dlr',
  '@kiln/engine-python',
] as const;

/**
 * Imports an engine package that is an optional peer (of the server or the CLI); when it is not
 * installed, fails with ENGINE_UNAVAILABLE saying which package to install.
 */
export async function importEnginePackage<T>(specifier: string): Promise<T> {
  try {
    return (await import(specifier)) as T;
  } catch (error) {
    if (!isNotFound(error, specifier)) throw error;
    throw new KilnError(
      KilnErrorCode.EngineUnavailable,
      `${specifier} is not installed: install ${specifier} (npm install ${specifier})`,
      { details: { hint: `npm install ${specifier}` } },
    );
  }
}

function isNotFound(error: unknown, specifier: string): boolean {
  const code = (error as { code?: unknown }).code;
  return (
    (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
    String((error as Error).message).includes(specifier)
  );
}

/** The engines a server knows: their providers, and the modules worker threads import. */
export interface EngineCatalog {
  readonly registry: EngineRegistry;
  /** Module specifiers that export a provider, for worker threads to import. */
  readonly modules: readonly string[];
  /** Modules that could not be imported, with why (an engine package not installed). */
  readonly missing: Readonly<Record<string, string>>;
  providerFor(engineName: string): EngineProvider | undefined;
}

/** Imports each engine package that is installed and registers its provider. */
export async function loadEngineCatalog(
  modules: readonly string[] = DEFAULT_ENGINE_MODULES,
): Promise<EngineCatalog> {
  const registry = new EngineRegistry();
  const loaded: string[] = [];
  const missing: Record<string, string> = {};
  const providers = new Map<string, EngineProvider>();
  for (const specifier of modules) {
    try {
      const module = (await import(specifier)) as {
        provider?: EngineProvider;
        default?: EngineProvider;
      };
      const provider = module.provider ?? module.default;
      if (!provider) throw new Error('exports no engine provider');
      registry.register(provider);
      providers.set(provider.name.toLowerCase(), provider);
      loaded.push(specifier);
    } catch (error) {
      missing[specifier] = error instanceof Error ? error.message : String(error);
    }
  }
  return {
    registry,
    modules: loaded,
    missing,
    providerFor: (name) => providers.get(name.toLowerCase()),
  };
}
