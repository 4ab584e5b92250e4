import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ADDON_ENV, PACKAGE_DIR, addonCandidates, loadAddonFrom } from './addon-loader.js';

describe('the addon loader', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-dlr-addon-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('looks at the override first, then the package build', () => {
    const candidates = addonCandidates({ [ADDON_ENV]: 'custom/kiln_dlr.node' });
    expect(candidates.map((c) => c.path)).toEqual([
      resolve('custom/kiln_dlr.node'),
      join(PACKAGE_DIR, 'build', 'Release', 'kiln_dlr.node'),
      join(PACKAGE_DIR, 'build', 'Debug', 'kiln_dlr.node'),
    ]);
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
    expect(message).toContain('npm run build -w @kiln/dlr-native');
  });
});
