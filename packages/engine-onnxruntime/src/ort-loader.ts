import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type * as OrtNode from 'onnxruntime-node';

export type OrtModule = typeof OrtNode;

let loading: Promise<OrtModule> | undefined;

/**
 * Imports onnxruntime-node once per thread. It is a peer dependency, imported only when the
 * engine is first used, so installing Kiln never drags the native runtime in.
 */
export function loadOrt(): Promise<OrtModule> {
  loading ??= importOrt().catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
}

async function importOrt(): Promise<OrtModule> {
  let module: unknown;
  try {
    module = await requireOrImport('onnxruntime-node');
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new KilnError(
      KilnErrorCode.EngineUnavailable,
      `onnxruntime-node could not be loaded (${reason}). Install it next to Kiln: npm install onnxruntime-node ` +
        '(CPU builds need no download; set ONNXRUNTIME_NODE_INSTALL=skip to skip the optional CUDA files).',
      { cause: error },
    );
  }
  // CommonJS under ESM: the API may sit on the default export.
  const named = module as Partial<OrtModule> & { default?: OrtModule };
  return named.InferenceSession ? (named as OrtModule) : named.default!;
}

/**
 * A CommonJS package by `require`: importing it makes Node's ES module loader scan its source
 * and that of every module it re-exports for named exports (~13 ms of a host thread's start
 * for onnxruntime-node). An ES module package is imported.
 */
async function requireOrImport(specifier: string): Promise<unknown> {
  try {
    return createRequire(import.meta.url)(specifier) as unknown;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ERR_REQUIRE_ESM') throw error;
    return import(specifier);
  }
}

/** Folder holding the native binding and any execution provider libraries, when found. */
export function ortBinaryDir(): string | undefined {
  try {
    const entry = createRequire(import.meta.url).resolve('onnxruntime-node');
    const dir = join(dirname(entry), '..', 'bin', 'napi-v6', process.platform, process.arch);
    return existsSync(dir) ? dir : undefined;
  } catch {
    return undefined;
  }
}
