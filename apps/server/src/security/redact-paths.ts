import path from 'node:path';

/**
 * An absolute file path not preceded by a word character, `:` or `/` (so that URLs and route
 * paths quoted from the request stay as they are).
 */
const ABSOLUTE_PATH = /(?<![\w:/.])\/(?:[^\s'"`,;:()[\]{}<>/]+\/)+([^\s'"`,;:()[\]{}<>/]*)/g;

/** Kiln's own routes, which messages may name. */
const ROUTE = /^\/(?:predictions|invocations|models|v1|v2|ping|metrics)\//;

/** Replaces every absolute server path in a message by its last segment. */
export function redactPaths(message: string): string {
  return message.replace(ABSOLUTE_PATH, (match: string, last: string) =>
    ROUTE.test(match) ? match : last || '.',
  );
}

/** A model URL as shown to clients: relative to the store when inside it, else its last segment. */
export function publicModelUrl(url: string, modelStore: string | undefined): string {
  const prefix = /^(?:[^=]*=)?(file:\/\/)?/.exec(url)![0];
  const location = url.slice(prefix.length);
  if (!path.isAbsolute(location)) return redactPaths(url);
  const relative = modelStore ? path.relative(modelStore, location) : '..';
  const shown =
    relative && !relative.startsWith('..') && !path.isAbsolute(relative)
      ? relative
      : path.basename(location);
  return `${prefix}${shown}`;
}

/** A JSON-like value with every string passed through redactPaths. */
export function redactPathsDeep<T>(value: T): T {
  if (typeof value === 'string') return redactPaths(value) as T;
  if (Array.isArray(value)) return value.map(redactPathsDeep) as T;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactPathsDeep(v)])) as T;
  }
  return value;
}
