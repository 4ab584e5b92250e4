import {
  DEFAULT_ENGINE_MODULES,
  type EngineCatalog,
  KilnError,
  KilnErrorCode,
  loadEngineCatalog as loadCoreEngineCatalog,
} from '@kiln/core';

export type { EngineCatalog } from '@kiln/core';
// The engine packages the server serves with when they are installed (core's list: a host
// thread started ahead of the server reads it too).
export { DEFAULT_ENGINE_MODULES } from '@kiln/core';

/** The package an engine module belongs to, as users install it (`@kiln/engine-dlr`). */
export function enginePackageOf(specifier: string): string {
  return specifier.replace(/\/provider$/, '');
}

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

/** Imports each engine package that is installed and registers its provider. */
export function loadEngineCatalog(
  modules: readonly string[] = DEFAULT_ENGINE_MODULES,
): Promise<EngineCatalog> {
  return loadCoreEngineCatalog(modules);
}
