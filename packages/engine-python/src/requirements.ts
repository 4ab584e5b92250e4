import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** What a model's requirements.txt came to. */
export interface RequirementsReport {
  /** Requirement lines of requirements.txt (comments and pip options left out). */
  readonly requirements: readonly string[];
  /** The per-model virtual environment (option.enable_venv=true), else undefined. */
  readonly venv?: string;
  /** Without a venv: requirements the interpreter does not satisfy (loading goes on). */
  readonly unsatisfied?: readonly string[];
}

export interface PrepareOptions {
  readonly modelName: string;
  readonly modelDir: string;
  readonly pythonExecutable: string;
  readonly enableVenv: boolean;
  /** Where per-model environments live; default `<tmpdir>/kiln-venvs`. */
  readonly venvRoot?: string;
  readonly timeoutMs: number;
  readonly log?: (line: string) => void;
}

/**
 * Handles requirements.txt as DJL Serving does: with option.enable_venv=true, a virtual
 * environment per model (`python3 -m venv --system-site-packages`) into which pip installs the
 * requirements, from the model's local_wheels/ alone when that folder exists
 * (`--no-index --find-links`); the environment is made once and reused while requirements,
 * wheels and interpreter stay the same. Without enable_venv nothing is installed: requirements
 * the system already satisfies are fine, others are reported and loading goes on.
 */
export async function prepareRequirements(
  options: PrepareOptions,
): Promise<RequirementsReport | undefined> {
  const file = join(options.modelDir, 'requirements.txt');
  if (!existsSync(file)) return undefined;
  const text = readFileSync(file, 'utf8');
  const requirements = requirementLines(text);
  if (!options.enableVenv) {
    const unsatisfied = await unsatisfiedRequirements(options.pythonExecutable, requirements);
    if (unsatisfied.length > 0) {
      (options.log ?? defaultLog)(
        `[${options.modelName}] requirements.txt names ${unsatisfied.join(', ')}, which ${options.pythonExecutable} does not provide; set option.enable_venv=true to install them`,
      );
    }
    return { requirements, unsatisfied };
  }
  const venv = await ensureVenv(options, text);
  return { requirements, venv };
}

/** The interpreter inside a virtual environment. */
export function venvPython(venv: string): string {
  return join(venv, 'bin', 'python');
}

function requirementLines(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.replace(/(^|\s)#.*$/, '').trim())
    .filter((line) => line && !line.startsWith('-'));
}

const CHECK_SCRIPT = `
import json, sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
missing = []
for line in json.loads(sys.argv[1]):
    try:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = metadata.version(req.name)
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            missing.append(line)
    except Exception:
        missing.append(line)
print(json.dumps(missing))
`;

async function unsatisfiedRequirements(python: string, lines: string[]): Promise<string[]> {
  if (lines.length === 0) return [];
  try {
    const { stdout } = await run(python, ['-c', CHECK_SCRIPT, JSON.stringify(lines)], 60_000);
    return JSON.parse(stdout) as string[];
  } catch {
    // The check needs importlib.metadata and packaging; without them, report nothing.
    return [];
  }
}

async function ensureVenv(options: PrepareOptions, requirementsText: string): Promise<string> {
  const wheels = join(options.modelDir, 'local_wheels');
  const hasWheels = existsSync(wheels);
  const hash = createHash('sha256')
    .update(options.pythonExecutable)
    .update('\0')
    .update(options.modelDir)
    .update('\0')
    .update(requirementsText)
    .update('\0')
    .update(hasWheels ? wheelListing(wheels) : '')
    .digest('hex')
    .slice(0, 16);
  const root = options.venvRoot ?? join(tmpdir(), 'kiln-venvs');
  const safeName = options.modelName.replace(/[^A-Za-z0-9_.-]/g, '_');
  const venv = join(root, `${safeName}-${hash}`);
  if (existsSync(join(venv, '.kiln-ready'))) return venv;

  mkdirSync(root, { recursive: true });
  // Made in place (a venv records its own path); the marker says it is complete.
  rmSync(venv, { recursive: true, force: true });
  const fail = (step: string, error: unknown): never => {
    rmSync(venv, { recursive: true, force: true });
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `requirements.txt of ${options.modelName} could not be installed (${step}): ${lastLines(error)}`,
    );
  };
  try {
    await run(
      options.pythonExecutable,
      ['-m', 'venv', '--system-site-packages', venv],
      options.timeoutMs,
    );
  } catch (error) {
    fail(`${options.pythonExecutable} -m venv`, error);
  }
  const pip = [
    '-m',
    'pip',
    'install',
    '--disable-pip-version-check',
    '--no-input',
    ...(hasWheels ? ['--no-index', '--find-links', wheels] : []),
    '-r',
    join(options.modelDir, 'requirements.txt'),
  ];
  try {
    const { stdout } = await run(venvPython(venv), pip, options.timeoutMs);
    for (const line of stdout.trim().split('\n').slice(-3))
      (options.log ?? defaultLog)(`[${options.modelName}] pip: ${line}`);
  } catch (error) {
    fail('pip install', error);
  }
  writeFileSync(join(venv, '.kiln-ready'), `${new Date().toISOString()}\n`);
  return venv;
}

/** Wheel names only: a changed wheel arrives under a new file name (its version is in it). */
function wheelListing(dir: string): string {
  try {
    return JSON.stringify(readdirSync(dir).sort());
  } catch {
    return '';
  }
}

function run(
  file: string,
  args: string[],
  timeoutMs: number,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      file,
      args,
      { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, env: { ...process.env } },
      (error, stdout, stderr) => {
        if (error) reject(Object.assign(error, { stdout, stderr }));
        else resolve({ stdout, stderr });
      },
    );
  });
}

/** The useful end of a failed command's output (pip's last ERROR lines). */
function lastLines(error: unknown): string {
  const { stderr, stdout, message, killed } = error as {
    stderr?: string;
    stdout?: string;
    message?: string;
    killed?: boolean;
  };
  if (killed) return 'timed out (option.model_loading_timeout)';
  const text = (stderr || stdout || message || String(error)).trim();
  const errors = text.split('\n').filter((line) => /^ERROR:/.test(line));
  return (errors.length > 0 ? errors : text.split('\n').slice(-3)).join(' ').slice(0, 1000);
}

function defaultLog(line: string): void {
  process.stderr.write(`${line}\n`);
}
