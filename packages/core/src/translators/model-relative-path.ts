import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';

/**
 * Resolves a file named by configuration to its real path inside the model folder. Absolute
 * paths and URLs are configuration errors; a path or symlink that leads outside the folder is
 * ARCHIVE_UNSAFE. Returns undefined when the file does not exist.
 */
export async function resolveModelFile(
  modelDir: string,
  relativePath: string,
  what: string,
): Promise<string | undefined> {
  if (
    path.isAbsolute(relativePath) ||
    path.win32.isAbsolute(relativePath) ||
    /^[a-z][a-z0-9+.-]*:/i.test(relativePath)
  ) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `${what} ${JSON.stringify(relativePath)} must be a path relative to the model folder`,
    );
  }
  const root = await realpath(modelDir).catch((error: unknown) => {
    throw KilnError.wrap(
      error,
      KilnErrorCode.InvalidConfig,
      `cannot open the model folder ${modelDir}`,
    );
  });
  const lexical = path.resolve(root, relativePath);
  assertInside(root, lexical, what, relativePath);
  let real: string;
  try {
    real = await realpath(lexical);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw KilnError.wrap(error, KilnErrorCode.InvalidConfig, `cannot read ${what} ${relativePath}`);
  }
  assertInside(root, real, what, relativePath);
  return real;
}

function assertInside(root: string, target: string, what: string, relativePath: string): void {
  const relative = path.relative(root, target);
  if (
    relative === '' ||
    relative === '..' ||
    relative.startsWith(`..${path.sep}`) ||
    path.isAbsolute(relative)
  ) {
    throw new KilnError(
      KilnErrorCode.ArchiveUnsafe,
      `${what} ${JSON.stringify(relativePath)} leads outside the model folder`,
    );
  }
}
