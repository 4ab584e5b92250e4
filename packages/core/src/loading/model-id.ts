import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KilnError, KilnErrorCode } from '../errors.js';
import {
  type ModelSource,
  type ResolveModelSourceOptions,
  resolveModelSource,
} from './model-source.js';

/** A Hugging Face Hub id: `name` or `owner/name`, letters, digits, `-`, `_` and `.`. */
const HUB_ID = /^[A-Za-z0-9][\w.-]*(?:\/[\w.-]+)?$/;
const REMOTE_SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;

export interface ModelIdOptions extends ResolveModelSourceOptions {
  /**
   * The folder the model's files must resolve into (a client registration's model store), the
   * model's own folder aside (an archive unpacked into the cache): checked on the path as
   * written before the file system is touched, then on its real path.
   */
  readonly root?: string | undefined;
}

/**
 * The model files `option.model_id` (DJL LMI's key) names: a folder or archive, absolute or
 * relative to the model's folder. Kiln downloads nothing, so a Hub id or remote URL with no
 * such local folder fails with what to do instead, rather than a missing-file error later.
 */
export async function resolveModelIdSource(
  modelDir: string,
  modelId: string,
  options: ModelIdOptions = {},
): Promise<ModelSource> {
  const written = modelId.trim();
  const scheme = REMOTE_SCHEME.exec(written)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'file') throw notDownloaded(written, 'remote');
  const location = path.resolve(modelDir, scheme === 'file' ? fileURLPath(written) : written);
  const root = options.root === undefined ? undefined : path.resolve(options.root);
  const allowed = (target: string, folders: readonly string[]) =>
    folders.some((folder) => isInside(target, folder));
  if (root !== undefined && !allowed(location, [root, modelDir])) throw outsideRoot(written);
  try {
    await stat(location);
  } catch {
    if (scheme === undefined && HUB_ID.test(written)) throw notDownloaded(written, 'hub');
    // An absolute path is a server path, which errors (they reach HTTP clients) never show.
    const shown = path.isAbsolute(written) ? path.basename(written) : written;
    throw new KilnError(
      KilnErrorCode.ModelNotFound,
      `option.model_id names no folder (${shown}); relative paths start at the model's folder`,
    );
  }
  if (
    root !== undefined &&
    !allowed(await realpath(location), [await realOrAsIs(root), await realOrAsIs(modelDir)])
  )
    throw outsideRoot(written);
  return resolveModelSource(location, options);
}

function notDownloaded(modelId: string, kind: 'hub' | 'remote'): KilnError {
  const what =
    kind === 'hub'
      ? 'looks like a Hugging Face Hub id and names no local folder'
      : 'is a remote location';
  return new KilnError(
    KilnErrorCode.ModelNotFound,
    `option.model_id=${modelId} ${what}: Hugging Face Hub and remote downloads are not available on this server; download the model folder and point option.model_id at it (an absolute path, or one relative to the model's folder)`,
    { details: { modelId } },
  );
}

function outsideRoot(modelId: string): KilnError {
  return new KilnError(
    KilnErrorCode.UrlNotAllowed,
    `option.model_id=${modelId} names a folder outside the model store`,
  );
}

function fileURLPath(url: string): string {
  try {
    return fileURLToPath(url);
  } catch {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `option.model_id=${url} is not a valid file URL`,
    );
  }
}

/** A folder's real path, or the path as it is when it cannot be resolved. */
function realOrAsIs(folder: string): Promise<string> {
  return realpath(folder).catch(() => folder);
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}
