import { mkdtemp, realpath, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  KilnError,
  KilnErrorCode,
  SERVING_PROPERTIES_FILE,
  inspectModelSource,
  loadModel,
  resolveModelSource,
  resolveTranslator,
} from '@kiln/core';
import { NO_PROGRESS, type ProgressReporter, formatBytes } from '@kiln/benchmark';
import type { EngineCatalog } from '@kiln/server';
import { type PackedFile, listPackedFiles } from './model-folder-files.js';
import { writeTar } from './write-tar.js';
import { writeZip } from './write-zip.js';

export type ArchiveFormat = 'zip' | 'tar.gz' | 'tar';

/** The archive format an output name asks for; undefined for any other name. */
export function archiveFormatFor(file: string): ArchiveFormat | undefined {
  const name = file.toLowerCase();
  if (name.endsWith('.zip')) return 'zip';
  if (name.endsWith('.tar.gz') || name.endsWith('.tgz')) return 'tar.gz';
  if (name.endsWith('.tar')) return 'tar';
  return undefined;
}

export interface PackOptions {
  readonly format: ArchiveFormat;
  /** Deflate/gzip level 0–9 (0 stores). */
  readonly level: number;
  /** Load the model and build its translator before writing (default), as serving would. */
  readonly load: boolean;
  readonly engines: EngineCatalog;
  readonly progress?: ProgressReporter;
}

/** What was packed and how it was checked. */
export interface PackResult {
  readonly archive: string;
  readonly format: ArchiveFormat;
  readonly files: number;
  readonly bytes: number;
  readonly archiveBytes: number;
  readonly engine: string;
  readonly translator: string;
  readonly hasServingProperties: boolean;
  /** The model loaded and its translator resolved before writing. */
  readonly loaded: boolean;
}

/**
 * Packs a model folder into an archive Kiln (and DJL) can serve, checking before it writes
 * that the folder holds only regular files, that an engine recognises it, and (with `load`)
 * that the model loads and its translator resolves; afterwards it reads the archive back
 * with Kiln's own extractor and compares. The archive appears only once complete.
 */
export async function packModel(
  dir: string,
  target: string,
  options: PackOptions,
): Promise<PackResult> {
  const files = await listPackedFiles(dir);
  if (files.length === 0) throw new KilnError(KilnErrorCode.InvalidInput, `${dir} is empty`);
  const inspection = await inspectModelSource(dir, { registry: options.engines.registry });
  if (inspection.engineName === undefined) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `no installed engine recognises the files of ${dir}`,
      {
        details: { hint: `name it in ${SERVING_PROPERTIES_FILE}, e.g. engine=OnnxRuntime` },
      },
    );
  }
  if (options.load) {
    const model = await loadModel(dir, { registry: options.engines.registry });
    try {
      await resolveTranslator(model);
    } finally {
      await model.dispose();
    }
  }

  // Written beside the target and renamed once checked; the extension lets the loader read it.
  const partial = path.join(
    path.dirname(target),
    `.${path.basename(target)}.${process.pid}.partial.${options.format}`,
  );
  try {
    const progress = options.progress ?? NO_PROGRESS;
    const total = files.reduce((sum, f) => sum + f.bytes, 0);
    let done = 0;
    const onBytes = (bytes: number) => progress.update((done += bytes));
    progress.start(total, 'packing', formatBytes);
    try {
      if (options.format === 'zip') await writeZip(files, partial, options.level, onBytes);
      else
        await writeTar(
          dir,
          files,
          partial,
          options.format === 'tar' ? false : options.level,
          onBytes,
        );
    } finally {
      progress.stop();
    }
    await verifyArchive(partial, files);
    await rename(partial, target);
  } finally {
    await rm(partial, { force: true });
  }
  const { size } = await stat(target);
  return {
    archive: target,
    format: options.format,
    files: files.length,
    bytes: files.reduce((sum, f) => sum + f.bytes, 0),
    archiveBytes: size,
    engine: inspection.engineName,
    translator: inspection.properties.translatorFactory ?? 'raw',
    hasServingProperties: files.some((f) => f.path === SERVING_PROPERTIES_FILE),
    loaded: options.load,
  };
}

/** Refuses to write an archive into the folder it packs (it would pack itself). */
export async function assertOutsideFolder(dir: string, target: string): Promise<void> {
  const root = await realpath(dir).catch(() => path.resolve(dir));
  const parent = await realpath(path.dirname(path.resolve(target))).catch(() =>
    path.dirname(path.resolve(target)),
  );
  const relative = path.relative(root, path.join(parent, path.basename(target)));
  const outside =
    relative === '..' || relative.startsWith(`..${path.sep}`) || path.isAbsolute(relative);
  if (!outside) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `${target} is inside the folder it would pack`,
      {
        details: { hint: 'write the archive next to the folder, e.g. -o ../model.zip' },
      },
    );
  }
}

/** Reads the archive back with Kiln's extractor (limits and safety checks on) and compares. */
async function verifyArchive(archive: string, files: readonly PackedFile[]): Promise<void> {
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'kiln-archive-check-'));
  try {
    const source = await resolveModelSource(archive, { cacheDir });
    const written = files.map((f) => f.path);
    // An archive whose files all sit in one folder is served from that folder.
    const top = written[0]?.split('/')[0];
    const nested =
      top !== undefined && written.every((p) => p.startsWith(`${top}/`))
        ? written.map((p) => p.slice(top.length + 1))
        : undefined;
    const read = source.files.join('\n');
    if (read !== written.join('\n') && read !== nested?.join('\n')) {
      throw new KilnError(
        KilnErrorCode.Internal,
        `the archive written does not read back as the folder (${source.files.length} files instead of ${files.length})`,
      );
    }
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
}
