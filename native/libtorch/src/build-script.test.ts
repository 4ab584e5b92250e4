import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const SCRIPTS = join(dirname(dirname(fileURLToPath(import.meta.url))), 'scripts');
const COMMON_SCRIPTS = join(dirname(SCRIPTS), '..', 'common', 'scripts');

// The scripts run from a scratch copy of the package so that their reports never touch the
// real build folder.
describe('scripts/build.mjs', () => {
  const root = mkdtempSync(join(tmpdir(), 'kiln-build-script-'));
  const pkg = join(root, 'pkg');
  cpSync(SCRIPTS, join(pkg, 'scripts'), { recursive: true });
  cpSync(COMMON_SCRIPTS, join(root, 'common', 'scripts'), { recursive: true });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const run = (args: string[], env: Record<string, string>) =>
    spawnSync(process.execPath, [join(pkg, 'scripts', 'build.mjs'), ...args], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
    });

  it('never fails an install when LibTorch is not where it was named, and says where it looked', () => {
    const missing = join(root, 'no-libtorch');
    const result = run([], { KILN_LIBTORCH_DIR: missing });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('LibTorch was not found');
    expect(result.stdout).toContain(join(missing, 'share/cmake/Torch/TorchConfig.cmake'));
    expect(result.stdout).toContain('apt-get install libtorch-dev');
    const report = JSON.parse(readFileSync(join(pkg, 'build', 'kiln-build.json'), 'utf8')) as {
      status: string;
      searched: string[];
    };
    expect(report.status).toBe('skipped');
    expect(report.searched.some((s) => s.startsWith(missing))).toBe(true);
  });

  it('fails an explicit build (npm run build) when LibTorch is missing', () => {
    expect(run(['--force'], { KILN_LIBTORCH_DIR: join(root, 'no-libtorch') }).status).toBe(1);
  });

  it('skips the install-time build when asked to', () => {
    const result = run([], { KILN_LIBTORCH_SKIP_BUILD: '1' });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('KILN_LIBTORCH_SKIP_BUILD=1');
  });

  it('finds a LibTorch folder or a Python torch folder by its TorchConfig.cmake', () => {
    const libtorch = join(root, 'libtorch');
    mkdirSync(join(libtorch, 'share', 'cmake', 'Torch'), { recursive: true });
    writeFileSync(join(libtorch, 'share', 'cmake', 'Torch', 'TorchConfig.cmake'), '');
    const probe = `import(${JSON.stringify(join(pkg, 'scripts', 'find-libtorch.mjs'))}).then((m) => console.log(JSON.stringify(m.findLibTorch({ LIBTORCH: ${JSON.stringify(libtorch)} }))))`;
    const out = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' });
    expect(JSON.parse(out.stdout)).toMatchObject({
      found: true,
      prefix: libtorch,
      torchDir: join(libtorch, 'share', 'cmake', 'Torch'),
      source: '$LIBTORCH',
    });
  });
});
