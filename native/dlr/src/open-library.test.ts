import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { addonCandidates, PACKAGE_DIR } from './addon-loader.js';
import { conformanceBinding } from './binding-support.js';
import { openDlrLibrary } from './open-library.js';

const run = promisify(execFile);
const binding = await conformanceBinding();
const addonPath = addonCandidates({}).find((c) => c.source === 'package build')!.path;

/** Runs a CommonJS snippet in a fresh Node process that loads the addon itself. */
async function inChild(script: string, env: Record<string, string | undefined>): Promise<string> {
  const clean = { ...process.env, ...env };
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete clean[key];
  const { stdout } = await run(process.execPath, ['-e', script], {
    env: clean,
    cwd: PACKAGE_DIR,
    timeout: 30_000,
  });
  return stdout.trim();
}

describe.skipIf(!binding)('opening libdlr', () => {
  const { addon, libraryPath } = binding!;
  it('names every place it looked, with why each failed, when no libdlr can be opened', async () => {
    const error = await openDlrLibrary(addon, {
      libraryPath: '/nowhere/option/libdlr.so',
      env: { KILN_DLR_LIBRARY: '/nowhere/env/libdlr.so', DLR_HOME: '/nowhere/home' },
      platform: 'linux',
    }).then(
      () => undefined,
      (e: unknown) => e as { code: string; message: string },
    );
    expect(error?.code).toBe('ENGINE_UNAVAILABLE');
    const message = error!.message;
    for (const place of [
      '/nowhere/option/libdlr.so (libraryPath option): not found',
      '/nowhere/env/libdlr.so (KILN_DLR_LIBRARY): not found',
      '/nowhere/home/lib/libdlr.so (DLR_HOME): not found',
      'libdlr.so (system dynamic loader (LD_LIBRARY_PATH, ld.so.cache)): ',
      '/usr/local/lib/libdlr.so (conventional folder)',
    ]) {
      expect(message).toContain(place);
    }
    expect(message).toContain('set KILN_DLR_LIBRARY');
  });

  it('refuses a shared library that is not DLR, naming the functions it lacks', async () => {
    const error = await addon.openLibrary(addonPath).then(
      () => undefined,
      (e: unknown) => e as { code: string; message: string },
    );
    expect(error).toMatchObject({ code: 'ENGINE_UNAVAILABLE' });
    expect(error!.message).toMatch(/not a DLR library .*lacks CreateDLRModel, DeleteDLRModel/);
  });

  it('goes on to the next place after a failure and says what it skipped', async () => {
    const opened = await openDlrLibrary(addon, {
      libraryPath: addonPath,
      env: { KILN_DLR_LIBRARY: libraryPath },
    });
    expect(opened.candidate).toEqual({ path: libraryPath, source: 'KILN_DLR_LIBRARY' });
    expect(opened.skipped).toEqual([expect.stringContaining('not a DLR library')]);
    expect(opened.library.path).toBe(libraryPath);
  });

  it('loads in a fresh process and sets TVM_NUM_THREADS only when it is unset', async () => {
    const script = `const addon = require(${JSON.stringify(addonPath)});
      const set = addon.defaultTvmThreads(1);
      console.log(JSON.stringify({ set, env: process.env.TVM_NUM_THREADS }));`;
    await expect(inChild(script, { TVM_NUM_THREADS: undefined }).then(JSON.parse)).resolves.toEqual(
      { set: '1', env: '1' },
    );
    await expect(inChild(script, { TVM_NUM_THREADS: '3' }).then(JSON.parse)).resolves.toEqual({
      set: '3',
      env: '3',
    });
  });

  it('opens the library and runs a model in a fresh process', async () => {
    const script = `const addon = require(${JSON.stringify(addonPath)});
      addon.openLibrary(process.env.KILN_DLR_LIBRARY)
        .then((lib) => console.log(lib.version))
        .catch((e) => { console.log(e.code + ': ' + e.message); process.exitCode = 1; });`;
    await expect(inChild(script, { KILN_DLR_LIBRARY: libraryPath })).resolves.toBe(
      '1.10.0-kiln-conformance',
    );
  });

  it('rejects an unopenable path in a fresh process with the loader’s reason', async () => {
    const script = `const addon = require(${JSON.stringify(addonPath)});
      addon.openLibrary(${JSON.stringify(join(PACKAGE_DIR, 'package.json'))})
        .then(() => console.log('opened'), (e) => console.log(e.code + ': ' + e.message));`;
    await expect(inChild(script, {})).resolves.toMatch(/^ENGINE_UNAVAILABLE: .*package\.json/);
  });
});
