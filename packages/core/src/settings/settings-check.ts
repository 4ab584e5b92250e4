import path from 'node:path';
import {
  type SettingContext,
  type SettingDeclaration,
  closestKey,
  declarationsByKey,
} from './setting-declaration.js';

/** A key that does nothing as written: unknown, another engine's, or not supported by Kiln. */
export interface SettingWarning {
  /** As written in the file (`option.mapLocation`, `log_model_metric`). */
  readonly key: string;
  readonly message: string;
  /** The known key it probably misspells. */
  readonly suggestion?: string;
}

/** What checking a file's keys found: warnings to print, and errors that fail its use. */
export interface SettingsCheck {
  readonly warnings: readonly SettingWarning[];
  readonly errors: readonly string[];
}

export const NO_SETTING_ISSUES: SettingsCheck = Object.freeze({ warnings: [], errors: [] });

/**
 * A declared key's value: a warning when Kiln does not implement the key, an error when it
 * cannot honour the value (a refusal, or a choice it does not offer), else nothing.
 */
export function checkDeclaredValue(
  written: string,
  declaration: SettingDeclaration,
  value: string,
  context: SettingContext = {},
): { warning?: SettingWarning; error?: string } {
  if (declaration.unsupported !== undefined) {
    return {
      warning: {
        key: written,
        message: `${written} is not supported by Kiln, ignored: ${declaration.unsupported}`,
      },
    };
  }
  const text = value.trim();
  if (text === '') return {};
  const refused = declaration.refuse?.(text, context);
  // A file's folder is a server path, which errors (they reach HTTP clients) never show.
  const shown = declaration.type === 'file' ? path.basename(text) : text;
  if (refused !== undefined) return { error: `${written}=${shown}: ${refused}` };
  const { values } = declaration;
  if (
    declaration.type === 'choice' &&
    values !== undefined &&
    !values.some((v) => v.toLowerCase() === text.toLowerCase())
  ) {
    return { error: `${written}=${shown} is not one of ${values.join(', ')}` };
  }
  return {};
}

/** The warning for a key no declaration knows, naming the closest known key when one is. */
export function unknownKeyWarning(
  written: string,
  known: Iterable<string>,
  ignoredBy = 'Kiln ignores it',
): SettingWarning {
  const suggestion = closestKey(written, known);
  return suggestion === undefined
    ? { key: written, message: `unknown key ${written}: ${ignoredBy}` }
    : { key: written, message: `unknown key ${written} (did you mean ${suggestion}?)`, suggestion };
}

/**
 * Checks every key of a flat file (config.properties) against its declarations: unknown keys
 * and keys Kiln does not implement are warnings, values it cannot honour are errors.
 */
export function checkSettings(
  values: Readonly<Record<string, string>>,
  declarations: readonly SettingDeclaration[],
  context: SettingContext = {},
): SettingsCheck {
  const byKey = declarationsByKey(declarations);
  const supported = declarations.filter((d) => d.unsupported === undefined).map((d) => d.key);
  const warnings: SettingWarning[] = [];
  const errors: string[] = [];
  for (const [key, value] of Object.entries(values)) {
    const declaration = byKey.get(key);
    if (declaration === undefined) {
      warnings.push(unknownKeyWarning(key, supported));
      continue;
    }
    const { warning, error } = checkDeclaredValue(key, declaration, value, context);
    if (warning) warnings.push(warning);
    if (error !== undefined) errors.push(error);
  }
  return { warnings, errors };
}
