import { existsSync } from 'node:fs';
import { KilnError, KilnErrorCode } from '@kiln/core';

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
  return {
    pythonExecutable: options.pythonExecutable ?? defaultPythonExecutable(),
    entryPoint: options.entryPoint ?? 'model.py',
    handler: options.handler ?? 'handle',
    // DJL's defaults: 240 s to load, 120 s per prediction.
    loadTimeoutMs: seconds(options, 'model_loading_timeout', 240),
    predictTimeoutMs: seconds(options, 'predict_timeout', 120),
    enableVenv: flag(options, 'enable_venv'),
    ...(options.venv_dir ? { venvRoot: options.venv_dir } : {}),
  };
}

function seconds(options: Readonly<Record<string, string>>, key: string, fallback: number): number {
  const raw = options[key];
  if (raw === undefined) return fallback * 1000;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `option.${key} must be a positive number of seconds, got ${raw}`,
    );
  }
  return value * 1000;
}

function flag(options: Readonly<Record<string, string>>, key: string): boolean {
  const raw = options[key]?.trim().toLowerCase();
  if (raw === undefined || raw === '' || raw === 'false') return false;
  if (raw === 'true') return true;
  throw new KilnError(
    KilnErrorCode.InvalidConfig,
    `option.${key} must be true or false, got ${raw}`,
  );
}
