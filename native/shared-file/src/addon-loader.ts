import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What the addon offers; every ArrayBuffer it returns is read-only memory (writes fault). */
export interface SharedFileAddon {
  /**
   * An ArrayBuffer over the process's mapping registered under `key`; when none is alive,
   * maps `path` read-only and registers it. The mapping lives while any ArrayBuffer over it
   * does, in any thread, and stays valid after the file is removed.
   */
  share(key: string, path: string): ArrayBuffer;
  /** An ArrayBuffer over the live mapping under `key`, or undefined. */
  find(key: string): ArrayBuffer | undefined;
  /**
   * Lets one thread make the file the others will map. `claimed`: the caller makes it, then
   * shares it and calls `unclaim`. `busy`: another thread is making it, or its mapping is alive
   * (`find` it). `failed: …`: an earlier maker gave up, saying why. A claim held by a thread
   * that ends is given back.
   */
  claim(key: string): 'claimed' | 'busy' | `failed: ${string}`;
  /** Gives a claim back; a `failure` is what later claims of the key answer. */
  unclaim(key: string, failure?: string): void;
  /**
   * A writable ArrayBuffer over the first `size` bytes of the open file `fd`, shared (MAP_SHARED)
   * with every process that maps the same file: memory two processes exchange data through.
   * Unmapped once the ArrayBuffer is collected; `fd` may be closed at once.
   */
  mapWritable(fd: number, size: number): ArrayBuffer;
  /** Live mappings in this process and their bytes. */
  stats(): { mappings: number; bytes: number };
}

/** Environment variable naming a kiln_shared_file.node to load instead of the package's. */
export const ADDON_ENV = 'KILN_SHARED_FILE_ADDON';
/** Folder of prebuilt addons (`<platform>-<arch>/kiln_shared_file.<libc>.node`). */
export const PREBUILDS_ENV = 'KILN_SHARED_FILE_PREBUILDS';

const ADDON_FILE = 'kiln_shared_file.node';
const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export interface AddonCandidate {
  readonly path: string;
  /** Why this place is searched, for error messages. */
  readonly source: string;
}

/** Where the addon is looked for, in order: the override, the package's build, prebuilds. */
export function addonCandidates(
  env: Readonly<Record<string, string | undefined>> = process.env,
): AddonCandidate[] {
  const candidates: AddonCandidate[] = [];
  const override = env[ADDON_ENV]?.trim();
  if (override) candidates.push({ path: resolve(override), source: ADDON_ENV });
  candidates.push({
    path: join(PACKAGE_DIR, 'build', 'Release', ADDON_FILE),
    source: 'package build',
  });
  const prebuilds = env[PREBUILDS_ENV]?.trim() || join(PACKAGE_DIR, 'prebuilds');
  const dir = join(prebuilds, `${process.platform}-${process.arch}`);
  const names =
    process.platform === 'linux' ? [`kiln_shared_file.${libc()}.node`, ADDON_FILE] : [ADDON_FILE];
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

export type AddonLoad =
  | { readonly addon: SharedFileAddon; readonly problem?: undefined }
  | { readonly addon?: undefined; readonly problem: string };

let loaded: AddonLoad | undefined;

/**
 * The addon, loaded once per thread, or why it cannot load (every place looked at, the
 * install-time build's report, and how to fix it). Never throws: callers fall back to copies.
 */
export function loadSharedFileAddon(
  env: Readonly<Record<string, string | undefined>> = process.env,
): AddonLoad {
  loaded ??= loadAddonFrom(addonCandidates(env));
  return loaded;
}

export function loadAddonFrom(candidates: readonly AddonCandidate[]): AddonLoad {
  const require = createRequire(import.meta.url);
  const tried: string[] = [];
  for (const candidate of candidates) {
    if (!existsSync(candidate.path)) {
      tried.push(`${candidate.path} (${candidate.source}): not found`);
      continue;
    }
    try {
      return { addon: require(candidate.path) as SharedFileAddon };
    } catch (error) {
      tried.push(
        `${candidate.path} (${candidate.source}): ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }
  const build = buildReport();
  return {
    problem: [
      'the shared-file addon (kiln_shared_file.node) could not be loaded. Looked in:',
      ...tried.map((line) => `  ${line}`),
      ...(build ? [`The install-time build reported: ${build}`] : []),
      'To fix: run `npm rebuild @kiln/shared-file-native --foreground-scripts` (needs cmake and a C++17 compiler).',
    ].join('\n'),
  };
}

function buildReport(): string | undefined {
  try {
    const report = JSON.parse(
      readFileSync(join(PACKAGE_DIR, 'build', 'kiln-build.json'), 'utf8'),
    ) as { status?: string; reason?: string };
    return report.reason ? `${report.status ?? 'unknown'}: ${report.reason}` : report.status;
  } catch {
    return undefined;
  }
}
