import { KilnError, KilnErrorCode } from '../errors.js';

/** A parsed DJL model URL: `[name[:version[:engine[:device]]]]=url`. */
export interface ModelUrl {
  readonly name: string | undefined;
  readonly version: string | undefined;
  readonly engine: string | undefined;
  readonly device: string | undefined;
  readonly url: string;
}

/**
 * Parses `resnet::PyTorch=file:///m/resnet18` and friends. Empty fields are undefined; a
 * string without `=` (or whose first `=` sits inside the URL) is a bare URL.
 */
export function parseModelUrl(spec: string): ModelUrl {
  const text = spec.trim();
  if (text === '') throw new KilnError(KilnErrorCode.InvalidInput, 'model URL is empty');
  const eq = text.indexOf('=');
  const prefix = eq < 0 ? '' : text.slice(0, eq);
  // An `=` after a scheme, a path separator, `?` or `#` belongs to the URL (a query string or
  // fragment), not to a name:version:engine:device prefix.
  if (eq < 0 || /[/\\?#]/.test(prefix)) {
    return { name: undefined, version: undefined, engine: undefined, device: undefined, url: text };
  }
  const url = text.slice(eq + 1).trim();
  if (url === '')
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `model URL ${JSON.stringify(spec)} names no location after "="`,
    );
  const parts = prefix.split(':');
  if (parts.length > 4) {
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `model URL prefix ${JSON.stringify(prefix)} has more than name:version:engine:device`,
    );
  }
  const field = (i: number) => (parts[i] ?? '').trim() || undefined;
  return { name: field(0), version: field(1), engine: field(2), device: field(3), url };
}

export function formatModelUrl(url: ModelUrl): string {
  const fields = [url.name, url.version, url.engine, url.device].map((f) => f ?? '');
  while (fields.length > 0 && fields[fields.length - 1] === '') fields.pop();
  return fields.length === 0 ? url.url : `${fields.join(':')}=${url.url}`;
}
