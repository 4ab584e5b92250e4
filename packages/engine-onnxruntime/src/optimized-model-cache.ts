import { randomBytes } from 'node:crypto';
import { constants, existsSync } from 'node:fs';
import {
  access,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { InferenceSession } from 'onnxruntime-node';
import type { OrtModule } from './ort-loader.js';

/** Names an optimized model: `model` the file it came from, `optimized` this optimization of it. */
export interface OptimizedModelKey {
  readonly model: string;
  readonly optimized: string;
}

/** An optimized model on disk; `release` removes it when it lived for this process only. */
export interface OptimizedModelFile {
  readonly file: string;
  /** 'hit': found in the cache; 'stored': saved into it now; else why it is not kept. */
  readonly cache: 'hit' | 'stored' | string;
  release(): Promise<void>;
}

/**
 * The model optimized as `options` say, saved in ORT format. With a cache folder it is kept
 * there (`<model>-<optimized>.ort`, its source named in a `.json` beside it, replacing older
 * optimizations of the same file and entries whose file is gone), so a
 * restarted server opens it without optimizing again; without one, or where the folder cannot
 * be written, it lives in a private temporary folder until released. Throws what ORT says
 * when the model cannot be optimized or saved.
 */
export async function optimizedModelFile(
  ort: OrtModule,
  modelPath: string,
  options: InferenceSession.SessionOptions,
  key: OptimizedModelKey,
  cacheDir: string | undefined,
): Promise<OptimizedModelFile> {
  const kept = () => Promise.resolve();
  if (cacheDir === undefined) return inTemporaryFolder(ort, modelPath, options, 'off');
  const cached = join(cacheDir, `${key.optimized}.ort`);
  if (existsSync(cached)) return { file: cached, cache: 'hit', release: kept };
  try {
    await mkdir(cacheDir, { recursive: true, mode: 0o700 });
    await access(cacheDir, constants.W_OK);
  } catch (error) {
    return inTemporaryFolder(ort, modelPath, options, notStored(error));
  }
  // Written under a private name, then renamed: a reader never maps a half-written file.
  const partial = join(
    cacheDir,
    `.${key.optimized}.${process.pid}.${randomBytes(6).toString('hex')}`,
  );
  try {
    await save(ort, modelPath, options, partial);
    await writeFile(
      join(cacheDir, `${key.optimized}.json`),
      JSON.stringify({ source: resolve(modelPath) }),
    );
    await rename(partial, cached);
  } catch (error) {
    await rm(partial, { force: true });
    if (isFileSystemError(error)) {
      return inTemporaryFolder(ort, modelPath, options, notStored(error));
    }
    throw error;
  }
  await evictStale(cacheDir, key);
  return { file: cached, cache: 'stored', release: kept };
}

/** Removes a cache entry (a damaged one ONNX Runtime could not open) and its source note. */
export async function discardCacheEntry(cacheDir: string, key: OptimizedModelKey): Promise<void> {
  await Promise.all(
    [`${key.optimized}.ort`, `${key.optimized}.json`].map((name) =>
      rm(join(cacheDir, name), { force: true }),
    ),
  );
}

/**
 * Removes the entries of earlier versions or optimizations of the same model file, and those
 * whose model file is gone (models loaded from temporary folders would otherwise pile up).
 */
async function evictStale(cacheDir: string, key: OptimizedModelKey): Promise<void> {
  const names = await readdir(cacheDir).catch(() => [] as string[]);
  const stale = await Promise.all(
    names
      .filter((name) => name.endsWith('.ort') && name !== `${key.optimized}.ort`)
      .map(async (name) => {
        const entry = name.slice(0, -'.ort'.length);
        if (entry.startsWith(`${key.model}-`)) return entry;
        const source = await sourceOf(join(cacheDir, `${entry}.json`));
        return source === undefined || !existsSync(source) ? entry : undefined;
      }),
  );
  // Files a process left half-written when it died.
  const abandoned = await Promise.all(
    names
      .filter((name) => name.startsWith('.'))
      .map(async (name) => {
        const info = await stat(join(cacheDir, name)).catch(() => undefined);
        return info && Date.now() - info.mtimeMs > ABANDONED_AFTER_MS ? name : undefined;
      }),
  );
  await Promise.all(
    stale
      .filter((entry): entry is string => entry !== undefined)
      .flatMap((entry) => [`${entry}.ort`, `${entry}.json`])
      .concat(abandoned.filter((name): name is string => name !== undefined))
      .map((name) => rm(join(cacheDir, name), { force: true })),
  );
}

/** A partial file this old belongs to no running save (decoder copies keep the same rule). */
export const ABANDONED_AFTER_MS = 3_600_000;

async function sourceOf(sidecar: string): Promise<string | undefined> {
  try {
    const { source } = JSON.parse(await readFile(sidecar, 'utf8')) as { source?: unknown };
    return typeof source === 'string' ? source : undefined;
  } catch {
    return undefined;
  }
}

async function inTemporaryFolder(
  ort: OrtModule,
  modelPath: string,
  options: InferenceSession.SessionOptions,
  cache: string,
): Promise<OptimizedModelFile> {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-ort-weights-'));
  const release = () => rm(dir, { recursive: true, force: true });
  try {
    const file = join(dir, 'model.ort');
    await save(ort, modelPath, options, file);
    return { file, cache, release };
  } catch (error) {
    await release();
    throw error;
  }
}

async function save(
  ort: OrtModule,
  modelPath: string,
  options: InferenceSession.SessionOptions,
  file: string,
): Promise<void> {
  const session = await ort.InferenceSession.create(modelPath, {
    ...options,
    optimizedModelFilePath: file,
    // ORT warns that an NCHWc-optimized model suits this machine only: that is all it is for.
    logSeverityLevel: options.logSeverityLevel ?? 3,
    extra: withSessionEntries(options.extra, { save_model_format: 'ORT' }),
  });
  await session.release();
  if (!existsSync(file)) throw new Error(`ONNX Runtime did not write ${file}`);
}

/** ONNX Runtime's `session.*` config entries added to those already in `extra`. */
export function withSessionEntries(
  extra: Record<string, unknown> | undefined,
  entries: Record<string, string>,
): Record<string, unknown> {
  const session = (extra?.session ?? {}) as Record<string, unknown>;
  return { ...extra, session: { ...session, ...entries } };
}

/** Why the cache folder took nothing, by the system's error code alone (no server paths). */
function notStored(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  return `not stored: ${typeof code === 'string' ? code : messageOf(error)}`;
}

function isFileSystemError(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^E[A-Z]+$/.test(code);
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
