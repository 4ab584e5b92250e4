import type { EngineProvider } from '../engine/engine.js';
import { KilnError, KilnErrorCode } from '../errors.js';
import {
  type SettingDeclaration,
  closestKey,
  declarationsByKey,
} from '../settings/setting-declaration.js';
import {
  type SettingWarning,
  type SettingsCheck,
  checkDeclaredValue,
  unknownKeyWarning,
} from '../settings/settings-check.js';
import type { ServingProperties } from './serving-properties.js';
import { SERVING_OPTION_SETTINGS, SERVING_SETTINGS } from './serving-settings.js';

const OPTION = 'option.';

export interface ModelSettingsContext {
  /** The provider of the engine that loads the model; undefined when none is known yet. */
  readonly engine?: EngineProvider | undefined;
  /** Every registered provider, to tell another engine's option from an unknown key. */
  readonly providers?: readonly EngineProvider[];
  /** The translator's declared arguments; undefined when it may read any key (a plugin). */
  readonly translatorArguments?: readonly SettingDeclaration[] | undefined;
  /** The model's folder, where option values naming files resolve. */
  readonly modelDir?: string;
}

/**
 * Checks a model's serving.properties against what reads them: Kiln's own keys, its engine's
 * `option.*` keys and its translator's arguments. A key nothing reads is a warning naming
 * the closest known key (or the engine that would read it); a key DJL defines that Kiln
 * does not implement is a warning saying so; a value Kiln cannot honour is an error.
 */
export function checkModelSettings(
  properties: ServingProperties,
  context: ModelSettingsContext = {},
): SettingsCheck {
  const { engine } = context;
  const serving = declarationsByKey(SERVING_SETTINGS);
  const servingOptions = declarationsByKey(SERVING_OPTION_SETTINGS);
  const engineOptions = engine?.options && declarationsByKey(engine.options);
  const translator = context.translatorArguments && declarationsByKey(context.translatorArguments);
  // Keys nothing declares may still be read by the model's own code or a plugin translator:
  // only a near miss of a known key is worth a warning then.
  const openOptions = engine?.passesSettingsToModel === true;
  const openArguments = translator === undefined || openOptions;
  const warnings: SettingWarning[] = [];
  const errors: string[] = [];
  const check = (written: string, declaration: SettingDeclaration, value: string) => {
    const { warning, error } = checkDeclaredValue(written, declaration, value, context);
    if (warning) warnings.push(warning);
    if (error !== undefined) errors.push(error);
  };
  const known = (...groups: (ReadonlyMap<string, SettingDeclaration> | undefined)[]) =>
    groups.flatMap((group) =>
      [...(group?.values() ?? [])].filter((d) => d.unsupported === undefined).map((d) => d.key),
    );

  for (const [key, value] of Object.entries(properties.raw)) {
    if (key.startsWith(OPTION)) {
      const name = key.slice(OPTION.length);
      const declaration = servingOptions.get(name) ?? engineOptions?.get(name);
      if (declaration) {
        check(key, declaration, value);
        continue;
      }
      // Without the engine's declarations, nothing tells a typo from a key it reads.
      if (engine === undefined || engineOptions === undefined) continue;
      const knownOptions = known(servingOptions, engineOptions).map((k) => OPTION + k);
      if (openOptions) {
        const near = nearMiss(key, knownOptions);
        if (near) warnings.push(near);
        continue;
      }
      const other = context.providers?.find(
        (p) => p !== engine && p.options?.some((d) => d.key === name && !d.unsupported),
      );
      warnings.push(
        other
          ? {
              key,
              message: `${key} is an option of the ${other.name} engine: ${engine.name} ignores it`,
            }
          : unknownKeyWarning(key, knownOptions, `the ${engine.name} engine ignores it`),
      );
      continue;
    }
    const declaration = serving.get(key) ?? translator?.get(key);
    if (declaration) {
      check(key, declaration, value);
      continue;
    }
    const knownKeys = known(serving, translator);
    if (openArguments) {
      const near = nearMiss(key, knownKeys);
      if (near) warnings.push(near);
      continue;
    }
    warnings.push(unknownKeyWarning(key, knownKeys));
  }
  return { warnings, errors };
}

/** The warning for a key that probably misspells a known one, else undefined. */
function nearMiss(key: string, known: readonly string[]): SettingWarning | undefined {
  const suggestion = closestKey(key, known);
  return suggestion === undefined ? undefined : unknownKeyWarning(key, [suggestion]);
}

/** One line per warning, as logs and the CLI print them. */
export function settingWarningLines(where: string, check: SettingsCheck): string[] {
  return check.warnings.map((w) => `${where}: ${w.message}`);
}

/** INVALID_CONFIG for a model whose settings Kiln cannot honour, or undefined when it can. */
export function settingsRefusal(model: string, check: SettingsCheck): KilnError | undefined {
  if (check.errors.length === 0) return undefined;
  return new KilnError(
    KilnErrorCode.InvalidConfig,
    `model ${model}: serving.properties asks for what Kiln cannot do: ${check.errors.join('; ')}`,
    { details: { model } },
  );
}
