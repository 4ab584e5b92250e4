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

/**
 * Checks a model location given over the management API (ShellTorch, CVE-2023-43654): no
 * remote URLs, and a local path must resolve — symlinks included — inside the model store or
 * match an allowed_urls pattern. Returns the checked absolute path.
 */
export function checkModelLocation(location: string, policy: UrlPolicy): string {
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
    throw new KilnError(
      KilnErrorCode.UrlNotAllowed,
      `malformed file URL ${JSON.stringify(location)}`,
    );
  }
  if (filePath.includes('\0'))
    throw new KilnError(KilnErrorCode.UrlNotAllowed, 'model path contains a NUL byte');
  const base = policy.modelStore;
  const absolute = path.isAbsolute(filePath)
    ? path.resolve(filePath)
    : base
      ? path.resolve(base, filePath)
      : undefined;
  if (absolute === undefined) {
    throw new KilnError(KilnErrorCode.UrlNotAllowed, 'relative model paths need a model_store');
  }
  let real: string;
  try {
    real = fs.realpathSync(absolute);
  } catch {
    throw new KilnError(KilnErrorCode.ModelNotFound, `model not found: ${filePath}`);
  }
  if (base !== undefined && isInside(real, fs.realpathSync(base))) return real;
  const href = `file://${real}`;
  if (policy.allowedUrls.some((pattern) => matchesWhole(pattern, href))) return real;
  throw new KilnError(
    KilnErrorCode.UrlNotAllowed,
    base === undefined
      ? 'registering models needs a model_store (or allowed_urls) on this server'
      : `model location is outside the model store and not in allowed_urls`,
  );
}

function isInside(child: string, parent: string): boolean {
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
