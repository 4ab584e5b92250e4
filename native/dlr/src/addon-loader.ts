import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DlrNativeError } from './native-error.js';
import type { DlrAddon } from './native-types.js';

/** Environment variable naming a kiln_dlr.node to load instead of the package's own build. */
export const ADDON_ENV = 'KILN_DLR_ADDON';

/** Folder of prebuilt addons (`<platform>-<arch>/kiln_dlr.<libc>.node`); default: the package's. */
export const PREBUILDS_ENV = 'KILN_DLR_PREBUILDS';

export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BUILD_REPORT = join(PACKAGE_DIR, 'build', 'kiln-build.json');

export interface AddonCandidate {
  readonly path: string;
  /** Why this place is searched, for error messages. */
  readonly source: string;
}

/** Where the addon is looked for, in order: the override, then the package's build. */
export function addonCandidates(
  env: Readonly<Record<string, string | undefined>> = process.env,
): AddonCandidate[] {
  const candidates: AddonCandidate[] = [];
  const override = env[ADDON_ENV]?.trim();
  if (override) candidates.push({ path: resolve(override), source: ADDON_ENV });
  candidates.push({
    path: join(PACKAGE_DIR, 'build', 'Release', 'kiln_dlr.node'),
    source: 'package build',
  });
  candidates.push({
    path: join(PACKAGE_DIR, 'build', 'Debug', 'kiln_dlr.node'),
    source: 'package debug build',
  });
  const prebuilds = env[PREBUILDS_ENV]?.trim() || join(PACKAGE_DIR, 'prebuilds');
  const dir = join(prebuilds, `${process.platform}-${process.arch}`);
  const names =
    process.platform === 'linux' ? [`kiln_dlr.${libc()}.node`, 'kiln_dlr.node'] : ['kiln_dlr.node'];
  for (const name of names) candidates.push({ path: join(dir, name), source: 'prebuilt' });
  return candidates;
}

/**
 * The C library Node runs on. musl systems (Alpine) carry musl's dynamic loader in /lib; reading
 * that folder costs microseconds, where process.report.getReport() took 7–25 ms of a starting
 * thread.
 */
function libc(): 'glibc' | 'musl' {
  try {
    return readdirSync('/lib').some((name) => name.startsWith('ld-musl-')) ? 'musl' : 'glibc';
  } catch {
    return 'glibc';
  }
}

let loaded: DlrAddon | undefined;

/**
 * Loads the addon once per thread (worker threads load their own instance) from
 * `addonCandidates(env)`. Throws as loadAddonFrom does.
 */
export function loadDlrAddon(
  env: Readonly<Record<string, string | undefined>> = process.env,
): DlrAddon {
  loaded ??= loadAddonFrom(addonCandidates(env));
  return loaded;
}

/**
 * Loads the first candidate that loads. Throws DlrNativeError(ENGINE_UNAVAILABLE) listing every
 * place looked at, why each failed, what the install-time build reported, and how to fix it.
 */
export function loadAddonFrom(candidates: readonly AddonCandidate[]): DlrAddon {
  const require = createRequire(import.meta.url);
  const tried: string[] = [];
  for (const candidate of candidates) {
    if (!existsSync(candidate.path)) {
      tried.push(`${candidate.path} (${candidate.source}): not found`);
      continue;
    }
    try {
      return require(candidate.path) as DlrAddon;
    } catch (error) {
      tried.push(
        `${candidate.path} (${candidate.source}): ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  const build = buildReport();
  throw new DlrNativeError(
    'ENGINE_UNAVAILABLE',
    [
      'the DLR addon (kiln_dlr.node) could not be loaded. Looked in:',
      ...tried.map((line) => `  ${line}`),
      ...(build ? [`The install-time build reported: ${build}`] : []),
      'To fix: run `npm rebuild @kiln/dlr-native --foreground-scripts` (builds from source: needs cmake and a C++17 compiler; no DLR is needed to build).',
    ].join('\n'),
  );
}

/** The install-time build's outcome, when it wrote one. */
function buildReport(): string | undefined {
  try {
    const report = JSON.parse(readFileSync(BUILD_REPORT, 'utf8')) as {
      status?: string;
      reason?: string;
    };
    return report.reason ? `${report.status ?? 'unknown'}: ${report.reason}` : report.status;
  } catch {
    return undefined;
  }
}
