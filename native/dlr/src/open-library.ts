import { existsSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { DlrNativeError } from './native-error.js';
import type { DlrAddon, DlrLibraryHandle } from './native-types.js';
import {
  type LibraryCandidate,
  LIBRARY_ENV,
  dlrLibraryCandidates,
  type LibrarySearchOptions,
} from './library-search.js';

export interface OpenedLibrary {
  readonly library: DlrLibraryHandle;
  /** The place it was found. */
  readonly candidate: LibraryCandidate;
  /** Every place tried before it, with why each failed. */
  readonly skipped: readonly string[];
}

/**
 * Opens the first usable libdlr among `dlrLibraryCandidates(options)`. Throws
 * DlrNativeError(ENGINE_UNAVAILABLE) naming every place looked at and why each failed.
 */
export async function openDlrLibrary(
  addon: DlrAddon,
  options: LibrarySearchOptions = {},
): Promise<OpenedLibrary> {
  const skipped: string[] = [];
  const candidates = dlrLibraryCandidates(options);
  for (const candidate of candidates) {
    if (isAbsolute(candidate.path) && !existsSync(candidate.path)) {
      skipped.push(`${candidate.path} (${candidate.source}): not found`);
      continue;
    }
    try {
      return { library: await addon.openLibrary(candidate.path), candidate, skipped };
    } catch (error) {
      skipped.push(
        `${candidate.path} (${candidate.source}): ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  throw new DlrNativeError(
    'ENGINE_UNAVAILABLE',
    [
      'DLR (libdlr) could not be loaded. Looked in:',
      ...skipped.map((line) => `  ${line}`),
      `To fix: install DLR (pip install dlr, or build neo-ai-dlr) and set ${LIBRARY_ENV} to its libdlr file.`,
    ].join('\n'),
  );
}
