import { KilnError, KilnErrorCode } from '../errors.js';

/**
 * Typed reads of translator arguments (serving.properties values are strings). A value that
 * does not parse is a configuration error naming the key, never a silent default.
 */
export class TranslatorArguments {
  constructor(private readonly args: Readonly<Record<string, string>>) {}

  /** The trimmed value, or undefined when absent or blank. */
  string(key: string): string | undefined {
    const value = this.args[key]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }

  int(key: string, fallback: number, min: number, max: number): number {
    const text = this.string(key);
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw this.invalid(key, `an integer from ${min} to ${max}`);
    }
    return value;
  }

  boolean(key: string, fallback: boolean): boolean {
    const text = this.string(key)?.toLowerCase();
    if (text === undefined) return fallback;
    if (text === 'true') return true;
    if (text === 'false') return false;
    throw this.invalid(key, 'true or false');
  }

  oneOf<T extends string>(key: string, choices: readonly T[], fallback: T): T {
    const text = this.string(key);
    if (text === undefined) return fallback;
    const match = choices.find((c) => c.toLowerCase() === text.toLowerCase());
    if (match === undefined) throw this.invalid(key, `one of ${choices.join(', ')}`);
    return match;
  }

  invalid(key: string, expected: string): KilnError {
    return new KilnError(
      KilnErrorCode.InvalidConfig,
      `translator argument ${key}=${this.args[key] ?? ''} is invalid: expected ${expected}`,
    );
  }
}
