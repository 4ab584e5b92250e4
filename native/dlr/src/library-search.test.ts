import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dlrLibraryCandidates, dlrLibraryName } from './library-search.js';

describe('dlrLibraryCandidates', () => {
  const home = mkdtempSync(join(tmpdir(), 'kiln-dlr-home-'));
  const sitePackages = join(home, '.local', 'lib', 'python3.11', 'site-packages');
  mkdirSync(sitePackages, { recursive: true });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('tries the option, KILN_DLR_LIBRARY, DLR_HOME, Python packages, the loader, then conventional folders', () => {
    const candidates = dlrLibraryCandidates({
      libraryPath: 'relative/libdlr.so',
      env: { KILN_DLR_LIBRARY: '/env/libdlr.so', DLR_HOME: '/opt/neo-ai-dlr' },
      platform: 'linux',
      home,
    });
    const paths = candidates.map((c) => c.path);
    expect(paths.slice(0, 4)).toEqual([
      resolve('relative/libdlr.so'),
      '/env/libdlr.so',
      '/opt/neo-ai-dlr/lib/libdlr.so',
      '/opt/neo-ai-dlr/build/lib/libdlr.so',
    ]);
    expect(paths).toContain(join(sitePackages, 'dlr', 'libdlr.so'));
    const loader = paths.indexOf('libdlr.so');
    expect(loader).toBeGreaterThan(paths.indexOf(join(sitePackages, 'dlr', 'libdlr.so')));
    expect(paths.slice(loader + 1)).toEqual([
      '/usr/local/lib/libdlr.so',
      '/usr/lib/libdlr.so',
      '/opt/dlr/lib/libdlr.so',
    ]);
    expect(candidates[0]!.source).toBe('libraryPath option');
    expect(candidates[1]!.source).toBe('KILN_DLR_LIBRARY');
  });

  it('lists a path once even when several settings name it', () => {
    const candidates = dlrLibraryCandidates({
      libraryPath: '/same/libdlr.so',
      env: { KILN_DLR_LIBRARY: '/same/libdlr.so' },
      home,
    });
    expect(candidates.filter((c) => c.path === '/same/libdlr.so')).toHaveLength(1);
  });

  it('uses each platform’s library name', () => {
    expect(dlrLibraryName('linux')).toBe('libdlr.so');
    expect(dlrLibraryName('darwin')).toBe('libdlr.dylib');
    expect(dlrLibraryName('win32')).toBe('dlr.dll');
    const windows = dlrLibraryCandidates({ env: {}, platform: 'win32', home });
    expect(windows.at(-1)).toEqual({
      path: 'dlr.dll',
      source: expect.stringContaining('dynamic loader'),
    });
  });
});
