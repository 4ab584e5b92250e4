import fs from 'node:fs';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';
import { isInside } from './url-allowlist.js';

/** Enough for any model folder; a deeper or larger tree is refused rather than walked forever. */
const MAX_ENTRIES = 10_000;
const MAX_DEPTH = 16;

/**
 * Checks that every file of a model folder resolves inside `root` (the model store, or the
 * folder itself): a `model.onnx` that links to `/etc/...` must not be loaded. Files and
 * archives need no walk: their own location was checked already.
 */
export function checkModelFilesInside(location: string, root: string): void {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(location);
  } catch {
    return; // Not a local path: the loader reports it.
  }
  if (!stat.isDirectory()) return;
  const realRoot = fs.realpathSync(root);
  let seen = 0;
  const walk = (dir: string, depth: number): void => {
    if (depth > MAX_DEPTH) throw unsafe('nests too deep');
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (++seen > MAX_ENTRIES) throw unsafe(`holds more than ${MAX_ENTRIES} files`);
      const full = path.join(dir, entry.name);
      if (entry.isSymbolicLink()) {
        let real: string;
        try {
          real = fs.realpathSync(full);
        } catch {
          continue; // A dangling link loads nothing.
        }
        if (!isInside(real, realRoot))
          throw unsafe(`links ${entry.name} to a file outside its allowed folder`);
      } else if (entry.isDirectory()) {
        walk(full, depth + 1);
      }
    }
  };
  walk(location, 0);
}

function unsafe(what: string): KilnError {
  return new KilnError(KilnErrorCode.UrlNotAllowed, `the model folder ${what}`);
}
