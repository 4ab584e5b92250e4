import { existsSync } from 'node:fs';
import { KilnError, KilnErrorCode, OptionReader } from '@kiln/core';

/** Settings of a Python model, from serving.properties' option.* keys (DJL's names). */
export interface PythonModelSettings {
  readonly pythonExecutable: string;
  readonly entryPoint: string;
  readonly handler: string;
  readonly loadTimeoutMs: number;
  readonly predictTimeoutMs: number;
  /** option.enable_venv: install requirements.txt into a virtual environment of the model. */
  readonly enableVenv: boolean;
  /** option.venv_dir: where per-model environments are made (default `<tmpdir>/kiln-venvs`). */
  readonly venvRoot?: string;
  /** option.env (`KEY=VALUE,KEY2=VALUE2`, DJL's form): added to the workers' environment. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * option.sharedMemory (default true): contents from 64 kB on reach the workers through
   * shared memory instead of the socket.
   */
  readonly sharedMemory: boolean;
}

/**
 * Debian's python3-numpy/python3-torch import only under the system interpreter, so it is the
 * default when present; otherwise the first python3 on PATH.
 */
export function defaultPythonExecutable(): string {
  return existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
}

export function resolveModelSettings(
  options: Readonly<Record<string, string>>,
): PythonModelSettings {
  const o = new OptionReader(options);
  const venvRoot = o.string('venv_dir');
  return {
    pythonExecutable: o.string('pythonExecutable') ?? defaultPythonExecutable(),
    entryPoint: o.string('entryPoint') ?? 'model.py',
    handler: o.string('handler') ?? 'handle',
    // DJL's defaults: 240 s to load, 120 s per prediction.
    loadTimeoutMs: (o.positiveNumber('model_loading_timeout') ?? 240) * 1000,
    predictTimeoutMs: (o.positiveNumber('predict_timeout') ?? 120) * 1000,
    enableVenv: o.boolean('enable_venv') ?? false,
    env: parseEnvOption(options.env),
    sharedMemory: o.boolean('sharedMemory') ?? true,
    ...(venvRoot ? { venvRoot } : {}),
  };
}

/** DJL's `option.env`: comma-separated `KEY=VALUE` pairs; an entry without `=` is refused. */
export function parseEnvOption(text: string | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of (text ?? '').split(',')) {
    if (entry.trim() === '') continue;
    const at = entry.indexOf('=');
    const key = at > 0 ? entry.slice(0, at).trim() : '';
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `option.env: ${JSON.stringify(entry.trim())} is not KEY=VALUE`,
      );
    }
    env[key] = entry.slice(at + 1).trim();
  }
  return env;
}
