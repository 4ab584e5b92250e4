import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  link,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  realpath,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { graphInputNames } from '../graph-input-names.js';
import { ABANDONED_AFTER_MS } from '../optimized-model-cache.js';
import { externalDataFiles, withNewKvOutputs } from './new-kv-outputs.js';

/** The model file sessions open, and how to give it back once they are closed. */
export interface ServedModelFile {
  readonly path: string;
  /** Whether it is the decoder with its new positions as outputs (withNewKvOutputs). */
  readonly newKvOutputs: boolean;
  release(): Promise<void>;
}

/** What an entry of the cache notes of the model it was made from. */
interface EntryNote {
  /** The model file's real path. */
  readonly source: string;
  /** `dev:ino:size:mtime` of each external data file, by its name: a replaced one is noticed. */
  readonly external: Readonly<Record<string, string>>;
}

const NOTE = 'source.json';

/**
 * For a KV-cache decoder whose presents withNewKvOutputs can tap, a copy of the model with
 * those outputs; any other model as it is. The graph inputs are read first, so that only a
 * decoder's file is read whole; weights in other files are hard-linked beside the copy, not
 * copied. A file that cannot be read, copied or linked is served as it is.
 *
 * With a cache folder, the copy is kept there (`decoders/<key>/`, the key from the file's
 * path and identity), so that a restarted server opens it again (and the optimized model
 * cache keeps its entry for it); a new version of the same file replaces it, and entries
 * whose model is gone are removed. Without one, or where it cannot be written, the copy lives
 * in a private temporary folder until released.
 */
export async function servedModelFile(
  modelPath: string,
  cacheDir?: string,
): Promise<ServedModelFile> {
  const asItIs = { path: modelPath, newKvOutputs: false, release: () => Promise.resolve() };
  const inputs = await graphInputNames(modelPath).catch(() => [] as string[]);
  if (!inputs.some((name) => name.startsWith('past_key_values.'))) return asItIs;
  const source = await realpath(modelPath).catch(() => undefined);
  const decoders = cacheDir && source ? join(cacheDir, 'decoders') : undefined;
  const key = source && (await entryKey(source).catch(() => undefined));
  const entry = decoders && key ? join(decoders, key) : undefined;
  if (entry && (await entryHolds(entry, basename(modelPath))))
    return kept(join(entry, basename(modelPath)));
  // An entry there that does not hold (a file gone, external data replaced) is made again.
  const broken = entry !== undefined && existsSync(entry);
  const bytes = await readFile(modelPath).catch(() => undefined);
  const rewritten = bytes && attempt(() => withNewKvOutputs(bytes));
  const external = bytes && attempt(() => externalDataFiles(bytes));
  if (!rewritten || !external) return asItIs;
  if (decoders && entry) {
    const partial = join(
      decoders,
      `.${basename(entry)}.${process.pid}.${randomBytes(6).toString('hex')}`,
    );
    const written = await writeCopy(partial, modelPath, rewritten, external, source!);
    if (written) {
      if (broken) await rm(entry, { recursive: true, force: true });
      // Another process may have stored the same entry first: then that one is served.
      await rename(partial, entry).catch(() => rm(partial, { recursive: true, force: true }));
      if (await entryHolds(entry, basename(modelPath))) {
        await evictStale(decoders, basename(entry), source!);
        return kept(join(entry, basename(modelPath)));
      }
    }
  }
  const dir = await mkdtemp(join(tmpdir(), 'kiln-decoder-'));
  if (!(await writeCopy(dir, modelPath, rewritten, external, source ?? modelPath))) return asItIs;
  return {
    path: join(dir, basename(modelPath)),
    newKvOutputs: true,
    release: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Opens the file servedModelFile serves for `modelPath`; where ONNX Runtime refuses the copy,
 * the model as it is. Throws what opening the model itself throws.
 */
export async function openServed<T>(
  modelPath: string,
  cacheDir: string | undefined,
  open: (path: string) => Promise<T>,
): Promise<{ opened: T; served: ServedModelFile }> {
  const served = await servedModelFile(modelPath, cacheDir);
  try {
    return { opened: await open(served.path), served };
  } catch (error) {
    await served.release();
    if (!served.newKvOutputs) throw error;
  }
  return {
    opened: await open(modelPath),
    served: { path: modelPath, newKvOutputs: false, release: () => Promise.resolve() },
  };
}

function kept(path: string): ServedModelFile {
  return { path, newKvOutputs: true, release: () => Promise.resolve() };
}

/**
 * Writes the copy into `dir` (made here): the model's pieces, hard links to its external data
 * (ORT refuses a symbolic link that leads out of the model's folder; across file systems
 * there is no hard link, and the model is served as it is), and the note. False, and nothing
 * left behind, where any of it fails.
 */
async function writeCopy(
  dir: string,
  modelPath: string,
  pieces: readonly Uint8Array[],
  external: readonly string[],
  source: string,
): Promise<boolean> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(join(dir, basename(modelPath)), pieces);
    for (const file of external) {
      await mkdir(dirname(join(dir, file)), { recursive: true });
      await link(resolve(dirname(modelPath), file), join(dir, file));
    }
    const note: EntryNote = {
      source,
      external: Object.fromEntries(
        await Promise.all(
          external.map(async (file) => [file, await identity(join(dir, file))] as const),
        ),
      ),
    };
    await writeFile(join(dir, NOTE), JSON.stringify(note));
    return true;
  } catch {
    await rm(dir, { recursive: true, force: true });
    return false;
  }
}

/** Whether a stored entry is whole and its external data files are still the model's. */
async function entryHolds(entry: string, file: string): Promise<boolean> {
  const note = await readNote(entry);
  if (!note || !existsSync(join(entry, file))) return false;
  for (const [file, was] of Object.entries(note.external)) {
    const now = await identity(resolve(dirname(note.source), file)).catch(() => undefined);
    if (now !== was) return false;
  }
  return true;
}

/**
 * Removes the entries of older versions of the same model file, those whose model is gone,
 * and copies a process left half-written when it died.
 */
async function evictStale(decoders: string, keep: string, source: string): Promise<void> {
  const names = await readdir(decoders).catch(() => [] as string[]);
  await Promise.all(
    names
      .filter((name) => name !== keep)
      .map(async (name) => {
        const path = join(decoders, name);
        const stale = name.startsWith('.')
          ? Date.now() - ((await stat(path).catch(() => undefined))?.mtimeMs ?? Date.now()) >
            ABANDONED_AFTER_MS
          : await readNote(path).then(
              (note) => !note || note.source === source || !existsSync(note.source),
            );
        if (stale) await rm(path, { recursive: true, force: true });
      }),
  );
}

async function readNote(entry: string): Promise<EntryNote | undefined> {
  try {
    const note = JSON.parse(await readFile(join(entry, NOTE), 'utf8')) as Partial<EntryNote>;
    return typeof note.source === 'string' && typeof note.external === 'object'
      ? (note as EntryNote)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The cache key of a model file: its path and its identity (a rewritten file gets a new one). */
async function entryKey(source: string): Promise<string> {
  return createHash('sha256')
    .update(`${source}|${await identity(source)}`)
    .digest('hex')
    .slice(0, 32);
}

async function identity(path: string): Promise<string> {
  const s = await stat(path, { bigint: true });
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}`;
}

/** What `f` returns, or undefined where it throws (a model ORT will report on itself). */
function attempt<T>(f: () => T | undefined): T | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}
