import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';

/** Environment variable naming the libdlr to load (a file path). */
export const LIBRARY_ENV = 'KILN_DLR_LIBRARY';

type Env = Readonly<Record<string, string | undefined>>;

export interface LibraryCandidate {
  /** A file path, or a bare file name that the system's dynamic loader searches for. */
  readonly path: string;
  /** Why this place is searched, for error messages. */
  readonly source: string;
}

export interface LibrarySearchOptions {
  /** A libdlr path given by the caller (engine option); searched first. */
  readonly libraryPath?: string;
  readonly env?: Env;
  readonly platform?: NodeJS.Platform;
  readonly home?: string;
}

/** DLR's shared library file name on each platform. */
export function dlrLibraryName(platform: NodeJS.Platform = process.platform): string {
  if (platform === 'win32') return 'dlr.dll';
  return platform === 'darwin' ? 'libdlr.dylib' : 'libdlr.so';
}

/**
 * Where libdlr is looked for, in order: the caller's path, KILN_DLR_LIBRARY, DLR_HOME's build,
 * the `dlr` Python package (pip installs libdlr beside its modules), the system's dynamic
 * loader (LD_LIBRARY_PATH, ld.so.cache), then conventional install folders.
 */
export function dlrLibraryCandidates(options: LibrarySearchOptions = {}): LibraryCandidate[] {
  const env = options.env ?? process.env;
  const platform = options.platform ?? process.platform;
  const name = dlrLibraryName(platform);
  const candidates: LibraryCandidate[] = [];
  const add = (path: string, source: string) => {
    if (!candidates.some((c) => c.path === path)) candidates.push({ path, source });
  };
  if (options.libraryPath?.trim()) add(resolve(options.libraryPath.trim()), 'libraryPath option');
  const fromEnv = env[LIBRARY_ENV]?.trim();
  if (fromEnv) add(resolve(fromEnv), LIBRARY_ENV);
  const dlrHome = env.DLR_HOME?.trim();
  if (dlrHome) {
    add(join(dlrHome, 'lib', name), 'DLR_HOME');
    add(join(dlrHome, 'build', 'lib', name), 'DLR_HOME');
  }
  for (const sitePackages of pythonPackageDirs(env, options.home ?? homedir())) {
    add(join(sitePackages, 'dlr', name), 'Python package dlr');
  }
  add(name, 'system dynamic loader (LD_LIBRARY_PATH, ld.so.cache)');
  if (platform !== 'win32') {
    for (const dir of ['/usr/local/lib', '/usr/lib', '/opt/dlr/lib'])
      add(join(dir, name), 'conventional folder');
  }
  return candidates;
}

/** site-packages / dist-packages folders of the Python installations found here. */
function pythonPackageDirs(env: Env, home: string): string[] {
  const prefixes = [
    env.VIRTUAL_ENV,
    env.CONDA_PREFIX,
    join(home, '.local'),
    '/usr/local',
    '/usr',
  ].filter((p): p is string => typeof p === 'string' && isAbsolute(p));
  const dirs: string[] = [];
  for (const prefix of prefixes) {
    const lib = join(prefix, 'lib');
    for (const python of listPythonDirs(lib)) {
      for (const kind of ['site-packages', 'dist-packages']) {
        const dir = join(lib, python, kind);
        if (existsSync(dir)) dirs.push(dir);
      }
    }
  }
  return dirs;
}

function listPythonDirs(lib: string): string[] {
  try {
    return readdirSync(lib)
      .filter((entry) => /^python3(\.\d+)?$/.test(entry))
      .sort();
  } catch {
    return [];
  }
}
