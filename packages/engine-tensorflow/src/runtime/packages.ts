import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

/** Thrown when an optional package is simply not installed (as opposed to failing to load). */
export class PackageMissingError extends Error {
  constructor(readonly packageName: string) {
    super(`${packageName} is not installed`);
    this.name = 'PackageMissingError';
  }
}

/** Imports an optional peer dependency; a missing package is a PackageMissingError. */
export async function importPackage(packageName: string): Promise<unknown> {
  // Checked first: how a failed import reads differs between loaders (Node's, a bundler's).
  if (!isPackageInstalled(packageName)) throw new PackageMissingError(packageName);
  try {
    return await import(packageName);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const message = error instanceof Error ? error.message : '';
    if (
      (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') &&
      message.includes(`'${packageName}'`)
    ) {
      throw new PackageMissingError(packageName);
    }
    throw error;
  }
}

/** The object a CommonJS package exports (tfjs ships CommonJS for Node). */
export function moduleExports<T>(namespace: unknown): T {
  const value = namespace as { default?: unknown };
  return (value.default ?? value) as T;
}

/** Whether an optional package can be found from here, without loading it. */
export function isPackageInstalled(packageName: string): boolean {
  try {
    require.resolve(`${packageName}/package.json`);
    return true;
  } catch {
    return false;
  }
}

export function packageVersion(packageName: string): string {
  const file = require.resolve(`${packageName}/package.json`);
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

const WASM_BINARIES = ['tfjs-backend-wasm.wasm', 'tfjs-backend-wasm-simd.wasm'];

/**
 * The folder holding the installed wasm backend's binaries, with a trailing slash as
 * setWasmPaths wants it. Found from the package itself: nothing is fetched.
 */
export function wasmBinaryFolder(): string {
  const folder = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm'));
  const missing = WASM_BINARIES.filter((file) => !existsSync(path.join(folder, file)));
  if (missing.length > 0) {
    throw new Error(
      `the wasm binaries ${missing.join(', ')} are missing from ${folder} (reinstall @tensorflow/tfjs-backend-wasm)`,
    );
  }
  return folder + path.sep;
}
