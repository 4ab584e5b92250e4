// The release step, `changeset version`, run on a scratch copy of the workspace manifests and
// the pending changesets: every public package gets its CHANGELOG, and the versions it writes
// still satisfy every range between Kiln's packages (no accidental 1.0.0, no stale pin).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHANGESET_BIN = path.join(
  path.dirname(createRequire(import.meta.url).resolve('@changesets/cli/package.json')),
  'bin.js',
);

interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

let scratch: string;
let manifests: Map<string, { dir: string; manifest: Manifest }>;

beforeAll(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-changesets-'));
  const files = execFileSync('git', ['ls-files', 'package.json', '*/package.json', '.changeset'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean);
  // Changesets written but not yet committed count too.
  const pending = fs.readdirSync(path.join(ROOT, '.changeset')).map((f) => `.changeset/${f}`);
  for (const file of new Set([...files, ...pending])) {
    fs.mkdirSync(path.dirname(path.join(scratch, file)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, file), path.join(scratch, file));
  }
  execFileSync(process.execPath, [CHANGESET_BIN, 'version'], { cwd: scratch, stdio: 'pipe' });
  manifests = new Map();
  for (const file of files.filter((f) => f.endsWith('package.json') && f !== 'package.json')) {
    const manifest = JSON.parse(fs.readFileSync(path.join(scratch, file), 'utf8')) as Manifest;
    manifests.set(manifest.name, { dir: path.dirname(path.join(scratch, file)), manifest });
  }
});

afterAll(() => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

describe('changeset version', () => {
  it('writes a CHANGELOG for every public package', () => {
    const published = [...manifests.values()].filter(({ manifest }) => !manifest.private);
    expect(published.length).toBeGreaterThanOrEqual(14);
    for (const { dir, manifest } of published) {
      const changelog = path.join(dir, 'CHANGELOG.md');
      expect(fs.existsSync(changelog), manifest.name).toBe(true);
      expect(fs.readFileSync(changelog, 'utf8')).toMatch(
        new RegExp(`^# ${manifest.name}\\n\\n## ${manifest.version.replaceAll('.', '\\.')}\\n`),
      );
    }
  });

  it('keeps every range between Kiln packages satisfied, below 1.0', () => {
    for (const { manifest } of manifests.values()) {
      expect(semver.major(manifest.version), manifest.name).toBe(0);
      for (const field of ['dependencies', 'devDependencies', 'peerDependencies'] as const) {
        for (const [name, range] of Object.entries(manifest[field] ?? {})) {
          const target = manifests.get(name)?.manifest;
          if (!target) continue;
          expect(
            semver.satisfies(target.version, range),
            `${manifest.name} ${field} ${name}@${range} vs ${target.version}`,
          ).toBe(true);
        }
      }
    }
  });
});
