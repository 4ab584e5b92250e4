import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ADDON_ENV,
  PACKAGE_DIR,
  PREBUILDS_ENV,
  addonCandidates,
  loadAddonFrom,
} from './addon-loader.js';

describe('the addon loader', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-dlr-addon-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('looks at the override first, then the package build, then the prebuilt addons', () => {
    const candidates = addonCandidates({ [ADDON_ENV]: 'custom/kiln_dlr.node' });
    const platform = `${process.platform}-${process.arch}`;
    expect(candidates.map((c) => c.path)).toEqual([
      resolve('custom/kiln_dlr.node'),
      join(PACKAGE_DIR, 'build', 'Release', 'kiln_dlr.node'),
      join(PACKAGE_DIR, 'build', 'Debug', 'kiln_dlr.node'),
      ...(process.platform === 'linux'
        ? [join(PACKAGE_DIR, 'prebuilds', platform, 'kiln_dlr.glibc.node')]
        : []),
      join(PACKAGE_DIR, 'prebuilds', platform, 'kiln_dlr.node'),
    ]);
  });

  it('looks for prebuilt addons where KILN_DLR_PREBUILDS says', () => {
    const candidates = addonCandidates({ [PREBUILDS_ENV]: dir });
    expect(candidates.filter((c) => c.source === 'prebuilt').map((c) => c.path)).toContain(
      join(dir, `${process.platform}-${process.arch}`, 'kiln_dlr.node'),
    );
  });

  it('names every place it looked, why each failed, and how to fix it', () => {
    const broken = join(dir, 'broken.node');
    writeFileSync(broken, 'not a shared object');
    let error: unknown;
    try {
      loadAddonFrom([
        { path: join(dir, 'absent.node'), source: 'first place' },
        { path: broken, source: 'second place' },
      ]);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'ENGINE_UNAVAILABLE' });
    const message = (error as Error).message;
    expect(message).toContain(`${join(dir, 'absent.node')} (first place): not found`);
    expect(message).toMatch(new RegExp(`broken\\.node \\(second place\\): .+`));
    expect(message).toContain('npm rebuild @kiln/dlr-native --foreground-scripts');
  });
});
