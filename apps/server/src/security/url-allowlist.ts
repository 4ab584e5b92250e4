import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KilnError, KilnErrorCode } from '@kiln/core';

export interface UrlPolicy {
  /** Model store folder: the only place models come from unless allowed_urls says more. */
  readonly modelStore: string | undefined;
  /** Regular expressions (TorchServe's allowed_urls) matched against the whole resolved file URL. */
  readonly allowedUrls: readonly string[];
}

/** A checked model location and the folder every file it loads must resolve into. */
export interface CheckedLocation {
  readonly path: string;
  readonly root: string;
}

/**
 * Checks a model location given over the management API (ShellTorch, CVE-2023-43654): no
 * remote URLs, and a local path must resolve — symlinks included — inside the model store or
 * match an allowed_urls pattern. Containment is decided on the path as written before the file
 * system is touched, so that the answer says nothing about what exists outside.
 */
export function checkModelLocation(location: string, policy: UrlPolicy): CheckedLocation {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(location)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'file') {
    throw new KilnError(
      KilnErrorCode.UrlNotAllowed,
      `remote model URLs are not allowed (${scheme}://); put the model in the model store`,
    );
  }
  let filePath: string;
  try {
    filePath = scheme === 'file' ? fileURLToPath(location) : location;
  } catch {
    throw new KilnError(KilnErrorCode.UrlNotAllowed, 'malformed file URL');
  }
  if (filePath.includes('\0'))
    throw new KilnError(KilnErrorCode.UrlNotAllowed, 'model path contains a NUL byte');
  const base = policy.modelStore;
  if (!path.isAbsolute(filePath) && !base) {
    throw new KilnError(KilnErrorCode.UrlNotAllowed, 'relative model paths need a model_store');
  }
  const absolute = path.resolve(base ?? '/', filePath);
  const inStore = base !== undefined && isInside(absolute, base);
  const allowed = (candidate: string) =>
    policy.allowedUrls.some((pattern) => matchesWhole(pattern, `file://${candidate}`));
  if (!inStore && !allowed(absolute)) throw outside(base);

  let real: string;
  try {
    real = fs.realpathSync(absolute);
  } catch {
    throw new KilnError(KilnErrorCode.ModelNotFound, `model not found: ${filePath}`);
  }
  // Links are followed only where they stay inside what was allowed.
  if (base !== undefined && isInside(real, fs.realpathSync(base)))
    return { path: real, root: fs.realpathSync(base) };
  if (allowed(real)) return { path: real, root: real };
  throw outside(base);
}

function outside(base: string | undefined): KilnError {
  return new KilnError(
    KilnErrorCode.UrlNotAllowed,
    base === undefined
      ? 'registering models needs a model_store (or allowed_urls) on this server'
      : 'model location is outside the model store and not in allowed_urls',
  );
}

export function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

function matchesWhole(pattern: string, value: string): boolean {
  try {
    return new RegExp(`^(?:${pattern})$`).test(value);
  } catch {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `allowed_urls entry ${JSON.stringify(pattern)} is not a valid regular expression`,
    );
  }
}
