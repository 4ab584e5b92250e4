import { existsSync } from 'node:fs';
import {
  type Allocator,
  KilnError,
  KilnErrorCode,
  OptionReader,
  allocatorLibrary,
  parseAllocator,
} from '@kiln/core';

/** Settings of a Python model, from serving.properties' option.* keys (DJL's names). */
export interface PythonModelSettings {
  readonly pythonExecutable: string;
  readonly entryPoint: string;
  readonly handler: string;
  /** What a step worker calls (option.rolling_batch): option.handler, else `StepHandler`. */
  readonly stepHandler: string;
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
  /**
   * option.max_response_size (bytes; default: the server's max_response_size): the most one
   * request's answer may hold. Undefined: no limit.
   */
  readonly maxResponseBytes?: number;
  /**
   * option.max_worker_rss_mb (default: the server's max_worker_rss_mb): a worker whose resident
   * memory passes it is replaced after its call. Undefined: no limit.
   */
  readonly maxRssBytes?: number;
  /**
   * option.allocator (default: the server's, from cpu_launcher_args): the malloc workers run
   * with, jemalloc or tcmalloc preloaded (LD_PRELOAD) or glibc's (`default`).
   */
  readonly allocator: Allocator;
  /** The preloaded allocator's library; undefined for glibc's. */
  readonly allocatorLibrary?: string;
}

/** Server-wide defaults, written by the server among a model's properties (not option.*). */
export const SERVER_DEFAULT_KEYS = {
  maxResponseSize: 'max_response_size',
  maxWorkerRssMb: 'max_worker_rss_mb',
  allocator: 'allocator',
} as const;

const MAX_BYTES = { min: 1, max: Number.MAX_SAFE_INTEGER };

/**
 * Debian's python3-numpy/python3-torch import only under the system interpreter, so it is the
 * default when present; otherwise the first python3 on PATH.
 */
export function defaultPythonExecutable(): string {
  return existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
}

export function resolveModelSettings(
  options: Readonly<Record<string, string>>,
  /** The model's properties, where the server writes its defaults (SERVER_DEFAULT_KEYS). */
  properties: Readonly<Record<string, string>> = {},
): PythonModelSettings {
  const o = new OptionReader(options);
  const server = new OptionReader(properties);
  const venvRoot = o.string('venv_dir');
  const { maxResponseSize, maxWorkerRssMb } = SERVER_DEFAULT_KEYS;
  const allocator = allocatorOf(o, server);
  // Looked up at load: a missing library fails the load, naming the package to install.
  const library = allocatorLibrary(allocator);
  const maxResponseBytes =
    o.integer(maxResponseSize, MAX_BYTES) ?? server.integer(maxResponseSize, MAX_BYTES);
  // 0 turns the server's limit off for this model.
  const rssMb =
    o.integer(maxWorkerRssMb, { max: 2 ** 30 }) ?? server.integer(maxWorkerRssMb, { max: 2 ** 30 });
  return {
    pythonExecutable: o.string('pythonExecutable') ?? defaultPythonExecutable(),
    entryPoint: o.string('entryPoint') ?? 'model.py',
    handler: o.string('handler') ?? 'handle',
    stepHandler: o.string('handler') ?? 'StepHandler',
    // DJL's defaults: 240 s to load, 120 s per prediction.
    loadTimeoutMs: (o.positiveNumber('model_loading_timeout') ?? 240) * 1000,
    predictTimeoutMs: (o.positiveNumber('predict_timeout') ?? 120) * 1000,
    enableVenv: o.boolean('enable_venv') ?? false,
    env: parseEnvOption(options.env),
    sharedMemory: o.boolean('sharedMemory') ?? true,
    ...(maxResponseBytes ? { maxResponseBytes } : {}),
    ...(rssMb ? { maxRssBytes: rssMb * 2 ** 20 } : {}),
    ...(venvRoot ? { venvRoot } : {}),
    allocator,
    ...(library ? { allocatorLibrary: library } : {}),
  };
}

function allocatorOf(o: OptionReader, server: OptionReader): Allocator {
  const own = o.string('allocator');
  if (own !== undefined) return parseAllocator(own, 'option.allocator');
  const chosen = server.string(SERVER_DEFAULT_KEYS.allocator);
  return chosen === undefined ? 'default' : parseAllocator(chosen, 'allocator');
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
