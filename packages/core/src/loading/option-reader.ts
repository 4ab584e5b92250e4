import { KilnError, KilnErrorCode } from '../errors.js';
import type { SettingDeclaration } from '../settings/setting-declaration.js';

/** Largest count an integer option takes unless the engine says otherwise (threads, ids). */
export const MAX_OPTION_INTEGER = 4096;

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

export interface IntegerRange {
  readonly min?: number;
  readonly max?: number;
}

/**
 * Reads a model's `option.*` values (serving.properties, prefix removed) the same way for
 * every engine: blank is unset, booleans are true/false (also yes/no, on/off, 1/0), integers
 * and numbers are checked against a range, and a bad value is INVALID_CONFIG naming the key.
 * Ranges and choices not given come from the engine's declarations of its options.
 */
export class OptionReader {
  private readonly declared: ReadonlyMap<string, SettingDeclaration>;

  constructor(
    private readonly options: Readonly<Record<string, string | undefined>>,
    declarations: readonly SettingDeclaration[] = [],
  ) {
    this.declared = new Map(declarations.map((d) => [d.key, d]));
  }

  /** The trimmed value, or undefined when unset or blank. */
  string(key: string): string | undefined {
    const text = this.options[key]?.trim();
    return text === undefined || text === '' ? undefined : text;
  }

  boolean(key: string): boolean | undefined {
    const text = this.string(key)?.toLowerCase();
    if (text === undefined) return undefined;
    if (TRUE.has(text)) return true;
    if (FALSE.has(text)) return false;
    throw this.invalid(key, 'must be true or false');
  }

  /**
   * An integer within `min` and `max` (default: as declared, else 0 and MAX_OPTION_INTEGER).
   */
  integer(key: string, range: IntegerRange = {}): number | undefined {
    const text = this.string(key);
    if (text === undefined) return undefined;
    const declared = this.declared.get(key);
    const { min = declared?.min ?? 0, max = declared?.max ?? MAX_OPTION_INTEGER } = range;
    const value = Number(text);
    if (!/^[+-]?\d+$/.test(text) || !Number.isSafeInteger(value) || value < min || value > max)
      throw this.invalid(key, `must be an integer from ${min} to ${max}`);
    return value;
  }

  /** A finite number greater than `exclusiveMin` (default 0), e.g. seconds. */
  positiveNumber(key: string): number | undefined {
    const text = this.string(key);
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!Number.isFinite(value) || value <= 0) throw this.invalid(key, 'must be a positive number');
    return value;
  }

  /**
   * One of `values` (default: the declared ones), compared without case; the value as
   * `values` spells it.
   */
  oneOf<T extends string>(
    key: string,
    values: readonly T[] = (this.declared.get(key)?.values ?? []) as readonly T[],
  ): T | undefined {
    const text = this.string(key);
    if (text === undefined) return undefined;
    const found = values.find((v) => v.toLowerCase() === text.toLowerCase());
    if (found === undefined) throw this.invalid(key, `is not one of ${values.join(', ')}`);
    return found;
  }

  /** INVALID_CONFIG for `key`'s value, with why. */
  invalid(key: string, why: string): KilnError {
    return new KilnError(
      KilnErrorCode.InvalidConfig,
      `option.${key}=${this.options[key] ?? ''} ${why}`,
      { details: { option: key } },
    );
  }
}
