import { KilnError, KilnErrorCode } from '../errors.js';
import type { SettingDeclaration } from '../settings/setting-declaration.js';

/**
 * Typed reads of translator arguments (serving.properties values are strings). A value that
 * does not parse is a configuration error naming the key, never a silent default. Ranges and
 * choices not given come from the translator's declarations.
 */
export class TranslatorArguments {
  private readonly declared: ReadonlyMap<string, SettingDeclaration>;

  constructor(
    private readonly args: Readonly<Record<string, string>>,
    declarations: readonly SettingDeclaration[] = [],
  ) {
    this.declared = new Map(declarations.map((d) => [d.key, d]));
  }

  /** The trimmed value, or undefined when absent or blank. */
  string(key: string): string | undefined {
    const value = this.args[key]?.trim();
    return value === undefined || value === '' ? undefined : value;
  }

  int(
    key: string,
    fallback: number,
    min = this.declared.get(key)?.min ?? Number.MIN_SAFE_INTEGER,
    max = this.declared.get(key)?.max ?? Number.MAX_SAFE_INTEGER,
  ): number {
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

  /** One of `choices` (default: the declared values), compared without case. */
  oneOf<T extends string>(key: string, choices: readonly T[] | undefined, fallback: T): T {
    choices ??= (this.declared.get(key)?.values ?? []) as readonly T[];
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
