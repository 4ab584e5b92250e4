import { UsageError } from '../cli-errors.js';

/** Commander's argument parser for an option given more than once: collects every value. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** `--option key=value` pairs as the serving.properties overrides they name. */
export function parseOverrides(pairs: readonly string[]): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0)
      throw new UsageError(
        `--option ${pair} is not key=value`,
        'e.g. --option option.intraOpNumThreads=1',
      );
    overrides[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return overrides;
}
