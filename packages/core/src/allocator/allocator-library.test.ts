import { describe, expect, it } from 'vitest';
import {
  PRELOADED_ALLOCATOR_ENV,
  findAllocatorLibrary,
  parseAllocator,
  preloadFor,
} from './allocator-library.js';

const LDCONFIG = [
  '3 libs found in cache `/etc/ld.so.cache`',
  '\tlibjemalloc.so.2 (libc6,AArch64) => /usr/lib/aarch64-linux-gnu/libjemalloc.so.2',
  '\tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2',
  '\tlibtcmalloc_minimal_debug.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libtcmalloc_minimal_debug.so.4',
].join('\n');

describe('findAllocatorLibrary', () => {
  it("takes the loader cache's entry of this machine's architecture", () => {
    const library = findAllocatorLibrary('jemalloc', {
      loaderCache: () => LDCONFIG,
      exists: () => true,
      arch: 'x64',
      platform: 'linux',
    });
    expect(library).toBe('/lib/x86_64-linux-gnu/libjemalloc.so.2');
  });

  it('looks in the multiarch folder when ldconfig cannot run', () => {
    const library = findAllocatorLibrary('tcmalloc', {
      loaderCache: () => {
        throw new Error('no ldconfig');
      },
      exists: (file) => file === '/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4',
      arch: 'x64',
      platform: 'linux',
    });
    expect(library).toBe('/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4');
  });

  it('names the file and the Debian package to install when the library is absent', () => {
    expect(() =>
      findAllocatorLibrary('tcmalloc', {
        loaderCache: () => LDCONFIG,
        exists: () => false,
        arch: 'x64',
        platform: 'linux',
      }),
    ).toThrow(
      /allocator tcmalloc: libtcmalloc_minimal\.so\.4 not found \(apt-get install libtcmalloc-minimal4\)/,
    );
  });

  it('refuses on other systems than Linux', () => {
    expect(() => findAllocatorLibrary('jemalloc', { platform: 'darwin' })).toThrow(/Linux only/);
  });
});

describe('preloadFor', () => {
  it('puts the library first and keeps what the environment preloads', () => {
    expect(preloadFor('/lib/je.so', { LD_PRELOAD: '/opt/hook.so' })).toEqual({
      LD_PRELOAD: '/lib/je.so:/opt/hook.so',
      [PRELOADED_ALLOCATOR_ENV]: '/lib/je.so',
    });
  });

  it('takes out only the allocator Kiln preloaded when the default one is chosen', () => {
    const env = { LD_PRELOAD: '/lib/je.so:/opt/hook.so', [PRELOADED_ALLOCATOR_ENV]: '/lib/je.so' };
    expect(preloadFor(undefined, env).LD_PRELOAD).toBe('/opt/hook.so');
  });
});

describe('parseAllocator', () => {
  it('reads the three names in any case and refuses others', () => {
    expect(parseAllocator(' JEMalloc ', 'option.allocator')).toBe('jemalloc');
    expect(() => parseAllocator('mimalloc', 'option.allocator')).toThrow(
      /option\.allocator must be one of jemalloc, tcmalloc, default/,
    );
  });
});
