import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LibTorchBinding } from './binding.js';

const PACKAGE_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
const ADDON_FILE = 'kiln_libtorch.node';

/** Explicit path to a built `kiln_libtorch.node`, tried before the package's own build. */
export const ADDON_PATH_ENV = 'KILN_LIBTORCH_ADDON';

/** Folder of prebuilt addons (`<platform>-<arch>/kiln_libtorch.<libc>.node`); default: the package's. */
export const PREBUILDS_ENV = 'KILN_LIBTORCH_PREBUILDS';

/** Thrown when no addon could be loaded; `searched` lists every place tried and why it failed. */
export class LibTorchUnavailableError extends Error {
  readonly code = 'ENGINE_UNAVAILABLE';
  readonly searched: readonly string[];

  constructor(message: string, searched: readonly string[]) {
    super(message);
    this.name = 'LibTorchUnavailableError';
    this.searched = searched;
  }
}

/** Places the addon is looked for, in order. */
export function addonCandidates(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string[] {
  const candidates = [
    join(PACKAGE_DIR, 'build', 'Release', ADDON_FILE),
    join(PACKAGE_DIR, 'build', 'Debug', ADDON_FILE),
    ...prebuiltCandidates(env[PREBUILDS_ENV] || join(PACKAGE_DIR, 'prebuilds')),
  ];
  const explicit = env[ADDON_PATH_ENV];
  return explicit ? [explicit, ...candidates] : candidates;
}

/**
 * The prebuilt addons that fit this platform, node-gyp-build style: `linux-x64/` holds
 * `kiln_libtorch.glibc.node` (or `.musl`), falling back to an untagged `kiln_libtorch.node`.
 */
export function prebuiltCandidates(prebuildsDir: string): string[] {
  const dir = join(prebuildsDir, `${process.platform}-${process.arch}`);
  const base = ADDON_FILE.replace(/\.node$/, '');
  const libc = process.platform === 'linux' ? [`${base}.${isMusl() ? 'musl' : 'glibc'}.node`] : [];
  return [...libc, ADDON_FILE].map((name) => join(dir, name));
}

/**
 * Whether Node runs on musl (Alpine), whose dynamic loader sits in /lib: reading that folder
 * costs microseconds, where process.report.getReport() took 7–25 ms of a starting thread.
 */
function isMusl(): boolean {
  try {
    return readdirSync('/lib').some((name) => name.startsWith('ld-musl-'));
  } catch {
    return false;
  }
}

let cached: LibTorchBinding | undefined;

/**
 * Loads the addon (once per thread: each worker thread gets its own instance of the
 * context-aware addon over the same LibTorch). Throws LibTorchUnavailableError listing every
 * place tried, what the install-time build found, and how to fix it.
 */
export function loadLibTorchBinding(
  env: Readonly<Record<string, string | undefined>> = process.env,
): LibTorchBinding {
  cached ??= loadAddonFrom(addonCandidates(env));
  return cached;
}

/** Loads the first of `candidates` that loads; throws LibTorchUnavailableError otherwise. */
export function loadAddonFrom(candidates: readonly string[]): LibTorchBinding {
  const require = createRequire(import.meta.url);
  const searched: string[] = [];
  for (const path of candidates) {
    if (!existsSync(path)) {
      searched.push(`${path}: not found`);
      continue;
    }
    try {
      return require(path) as LibTorchBinding;
    } catch (error) {
      searched.push(
        `${path}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
      );
    }
  }
  throw new LibTorchUnavailableError(explain(searched), searched);
}

function explain(searched: readonly string[]): string {
  const lines = [
    'the LibTorch addon could not be loaded. Tried:',
    ...searched.map((s) => `  ${s}`),
  ];
  const build = buildReport();
  if (build) lines.push(`Install-time build: ${build}`);
  if (searched.some((s) => /cannot open shared object file|Library not loaded/.test(s))) {
    lines.push(
      'The addon is there but the LibTorch libraries it links against are not: LibTorch is absent.',
    );
  }
  lines.push(
    'To fix:',
    '  install LibTorch (Debian/Ubuntu: apt-get install libtorch-dev); the prebuilt linux-x64 addon',
    "  links against Debian 12's LibTorch 1.13. For another LibTorch, build against it:",
    '  KILN_LIBTORCH_DIR=/path/to/libtorch npm rebuild @kiln/libtorch-native --foreground-scripts',
    '  (or KILN_LIBTORCH_PYTHON=/usr/bin/python3 to use the torch of a Python install), or set',
    '  KILN_LIBTORCH_ADDON to a built kiln_libtorch.node',
  );
  return lines.join('\n');
}

/** What scripts/build.mjs recorded about its last run, in one line. */
function buildReport(): string | undefined {
  const path = join(PACKAGE_DIR, 'build', 'kiln-build.json');
  if (!existsSync(path)) return 'never ran (no build/kiln-build.json)';
  try {
    const report = JSON.parse(readFileSync(path, 'utf8')) as {
      status?: string;
      reason?: string;
      searched?: string[];
      torchDir?: string;
    };
    const parts = [report.status ?? 'unknown'];
    if (report.reason) parts.push(report.reason);
    if (report.torchDir) parts.push(`LibTorch at ${report.torchDir}`);
    if (report.searched?.length) parts.push(`looked for ${report.searched.join('; ')}`);
    return parts.join(': ');
  } catch {
    return `unreadable report ${path}`;
  }
}
