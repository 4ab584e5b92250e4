import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { KilnError, KilnErrorCode } from '../errors.js';

/** The memory allocators a process may be started with (TorchServe's launcher's three). */
export const ALLOCATORS = ['jemalloc', 'tcmalloc', 'default'] as const;
export type Allocator = (typeof ALLOCATORS)[number];

/** The shared library of each allocator, and the Debian package that installs it. */
export const ALLOCATOR_LIBRARIES = {
  jemalloc: { file: 'libjemalloc.so.2', debianPackage: 'libjemalloc2' },
  tcmalloc: { file: 'libtcmalloc_minimal.so.4', debianPackage: 'libtcmalloc-minimal4' },
} as const;

/**
 * Set in the environment of a process Kiln started with an allocator preloaded: the library's
 * path. Kiln's own re-exec reads it to start only once, and Python workers that chose another
 * allocator take that path out of the LD_PRELOAD they inherit.
 */
export const PRELOADED_ALLOCATOR_ENV = 'KILN_PRELOADED_ALLOCATOR';

/** A value of `option.allocator` or `allocator`; anything else is INVALID_CONFIG naming `key`. */
export function parseAllocator(value: string, key: string): Allocator {
  const name = value.trim().toLowerCase();
  if ((ALLOCATORS as readonly string[]).includes(name)) return name as Allocator;
  throw new KilnError(
    KilnErrorCode.InvalidConfig,
    `${key} must be one of ${ALLOCATORS.join(', ')} (got ${JSON.stringify(value)})`,
  );
}

/** Where a library may live when the loader's cache does not list it, for this machine. */
function libraryDirs(arch: string = process.arch): string[] {
  const multiarch = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' }[arch];
  return [
    ...(multiarch ? [`/usr/lib/${multiarch}`, `/lib/${multiarch}`] : []),
    '/usr/lib64',
    '/usr/lib',
    '/usr/local/lib',
  ];
}

/** The loader cache's word for this machine's libraries (`ldconfig -p` prints it per entry). */
const LDCONFIG_ARCH: Readonly<Record<string, string>> = { x64: 'x86-64', arm64: 'AArch64' };

export interface LibrarySearch {
  /** `ldconfig -p`'s output; throws when ldconfig cannot run. */
  readonly loaderCache?: () => string;
  readonly exists?: (file: string) => boolean;
  readonly arch?: string;
  readonly platform?: string;
}

const found = new Map<string, string>();

/**
 * The path of an allocator's library: from the loader's cache (`ldconfig -p`, entries of this
 * machine's architecture), else the usual library folders. Absent, a KilnError names the file,
 * the Debian package that installs it and where it was looked for.
 */
export function findAllocatorLibrary(
  allocator: Exclude<Allocator, 'default'>,
  search: LibrarySearch = {},
): string {
  const { file, debianPackage } = ALLOCATOR_LIBRARIES[allocator];
  const platform = search.platform ?? process.platform;
  if (platform !== 'linux') {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `allocator ${allocator}: an allocator is preloaded on Linux only (this is ${platform})`,
    );
  }
  const cached = search.loaderCache ? undefined : found.get(file);
  if (cached !== undefined) return cached;
  const exists = search.exists ?? existsSync;
  const fromCache = inLoaderCache(file, search).filter(exists);
  const dirs = libraryDirs(search.arch);
  const library = fromCache[0] ?? dirs.map((dir) => path.join(dir, file)).find(exists);
  if (library === undefined) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `allocator ${allocator}: ${file} not found (apt-get install ${debianPackage}); looked in ldconfig -p, ${dirs.join(', ')}`,
    );
  }
  if (!search.loaderCache) found.set(file, library);
  return library;
}

function inLoaderCache(file: string, search: LibrarySearch): string[] {
  let listing: string;
  try {
    listing = (search.loaderCache ?? runLdconfig)();
  } catch {
    return [];
  }
  const arch = LDCONFIG_ARCH[search.arch ?? process.arch];
  const paths: string[] = [];
  // "\tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2"
  for (const line of listing.split('\n')) {
    const match = /^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$/.exec(line);
    if (!match || match[1] !== file) continue;
    if (arch === undefined || match[2]!.split(',').includes(arch)) paths.push(match[3]!);
  }
  return paths;
}

function runLdconfig(): string {
  // Not always on a user's PATH (Debian keeps it in /sbin).
  for (const ldconfig of ['/sbin/ldconfig', '/usr/sbin/ldconfig', 'ldconfig']) {
    try {
      return execFileSync(ldconfig, ['-p'], { encoding: 'utf8', timeout: 10_000, stdio: 'pipe' });
    } catch {
      // the next one
    }
  }
  throw new Error('ldconfig did not run');
}

/**
 * The LD_PRELOAD of a process to be started with `library` preloaded (first, before what the
 * environment preloads already), or without the allocator Kiln preloaded into this process
 * (`library` undefined: the `default` allocator).
 */
export function preloadFor(
  library: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): { LD_PRELOAD: string; [PRELOADED_ALLOCATOR_ENV]: string } {
  const inherited = (env.LD_PRELOAD ?? '')
    .split(/[:\s]+/)
    .filter((entry) => entry !== '' && entry !== env[PRELOADED_ALLOCATOR_ENV] && entry !== library);
  return {
    LD_PRELOAD: [...(library ? [library] : []), ...inherited].join(':'),
    [PRELOADED_ALLOCATOR_ENV]: library ?? '',
  };
}

/** The allocator's library, or undefined for the default one (glibc's malloc). */
export function allocatorLibrary(allocator: Allocator, search?: LibrarySearch): string | undefined {
  return allocator === 'default' ? undefined : findAllocatorLibrary(allocator, search);
}
