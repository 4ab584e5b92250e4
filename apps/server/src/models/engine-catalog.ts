import { EngineRegistry, type EngineProvider } from '@kiln/core';

/** Engine packages the server serves with when they are installed. */
export const DEFAULT_ENGINE_MODULES = [
  '@kiln/engine-onnxruntime',
  '@kiln/engine-libtorch',
  '@kiln/engine-tensorflow',
  '@kiln/engine-dlr',
] as const;

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
