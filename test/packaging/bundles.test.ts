// tools/bundle-dist.mjs: a package's entries bundled into bundle/, with the modules that
// resolve paths from their own URL (and what they import) left in dist/, so that every module
// runs once per thread and every such path still names its file.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleDist, bundleEntries, readsPathsFromItsUrl } from '../../tools/bundle-dist.mjs';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('readsPathsFromItsUrl', () => {
  it.each([
    ["const here = new URL('./worker.js', import.meta.url);", true],
    ["const require = createRequire(import.meta.url); require('some-package');", false],
    ["const require = createRequire(import.meta.url); require.resolve('@scope/pkg');", false],
    ["const require = createRequire(import.meta.url); require('../package.json');", true],
    ["const require = createRequire(import.meta.url); require.resolve('./data.bin');", true],
    ['export const two = 2;', false],
  ])('%s → %s', (source, expected) => {
    expect(readsPathsFromItsUrl(source)).toBe(expected);
  });
});

describe('bundleDist', () => {
  let dir: string;

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bundle-'));
    const file = (name: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), text);
    };
    file(
      'package.json',
      JSON.stringify({
        name: 'fixture',
        type: 'module',
        version: '1.2.3',
        kiln: { bundle: ['index.js', 'lazy-entry.js'] },
      }),
    );
    // A counter every importer shares: bundled twice, it would count twice.
    file(
      'dist/shared.js',
      'globalThis.loads = (globalThis.loads ?? 0) + 1;\nexport const id = {};',
    );
    file(
      'dist/sub/located.js',
      "import { id } from '../shared.js';\nexport const data = new URL('./data.txt', import.meta.url);\nexport const sharedId = id;",
    );
    file('dist/sub/data.txt', 'beside its module');
    file(
      'dist/sub/helper.js',
      "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nexport const pathModule = require('node:path').sep;",
    );
    // A top-level module's own relative paths keep working: bundle/ sits where dist/ does.
    file(
      'dist/version.js',
      "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nexport const version = require('../package.json').version;",
    );
    file(
      'dist/index.js',
      [
        "import { id } from './shared.js';",
        "import { data, sharedId } from './sub/located.js';",
        "import { pathModule } from './sub/helper.js';",
        "export { version } from './version.js';",
        'export const same = id === sharedId;',
        'export const dataUrl = data.href;',
        'export const sep = pathModule;',
        "export const lazy = () => import('./lazy.js');",
      ].join('\n'),
    );
    file('dist/lazy.js', "export const answer = 42;\nimport 'node:zlib';");
    file('dist/lazy-entry.js', "export { answer } from './lazy.js';");
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('bundles the entries, leaving what resolves paths from its URL in dist/', async () => {
    const written = await bundleDist(dir);
    expect(written).toEqual(expect.arrayContaining(['bundle/index.js', 'bundle/lazy-entry.js']));
    const index = fs.readFileSync(path.join(dir, 'bundle', 'index.js'), 'utf8');
    // located.js reads its URL: it stays, and so does shared.js, which it imports.
    expect(index).toContain('../dist/sub/located.js');
    expect(index).toContain('../dist/shared.js');
    // helper.js only requires a package by name: it moves into the bundle.
    expect(index).not.toMatch(/from "[^"]*helper\.js"/);
    expect(index).toContain('// dist/sub/helper.js');
    const script = [
      `const m = await import(${JSON.stringify(path.join(dir, 'bundle', 'index.js'))});`,
      'const lazy = await m.lazy();',
      `const e = await import(${JSON.stringify(path.join(dir, 'bundle', 'lazy-entry.js'))});`,
      'console.log(JSON.stringify({ same: m.same, loads: globalThis.loads, dataUrl: m.dataUrl,',
      '  version: m.version, sep: m.sep, answer: lazy.answer, entryAnswer: e.answer }));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
    const seen = JSON.parse(stdout) as Record<string, unknown>;
    expect(seen).toEqual({
      same: true,
      loads: 1,
      dataUrl: expect.stringMatching(/\/dist\/sub\/data\.txt$/),
      version: '1.2.3',
      sep: path.sep,
      answer: 42,
      entryAnswer: 42,
    });
  });

  it('refuses an entry that is not at the top of dist/', () => {
    fs.writeFileSync(
      path.join(dir, 'package.json'),
      JSON.stringify({ name: 'fixture', type: 'module', kiln: { bundle: ['sub/located.js'] } }),
    );
    expect(() => bundleEntries(dir)).toThrow(/at the top of dist/);
  });
});

describe("the repository's packages", () => {
  // Each exports target in bundle/ is one of the package's entries, and the reverse.
  const packages = ['packages', 'apps'].flatMap((group) =>
    fs
      .readdirSync(path.join(ROOT, group))
      .map((name) => path.join(ROOT, group, name))
      .filter((dir) => fs.existsSync(path.join(dir, 'package.json'))),
  );
  it.each(packages.map((dir) => [path.relative(ROOT, dir), dir]))(
    '%s points its exports at its bundle entries',
    (_, dir) => {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
        exports?: Record<string, { default?: string }>;
        main?: string;
        files?: string[];
      };
      const entries = bundleEntries(dir);
      const targets = [
        ...Object.values(pkg.exports ?? {}).map((entry) => entry.default),
        pkg.main,
      ].filter((file): file is string => typeof file === 'string');
      for (const target of targets.filter((t) => t.startsWith('./bundle/')))
        expect(entries).toContain(target.slice('./bundle/'.length));
      if (entries.length > 0) expect(pkg.files).toContain('bundle');
    },
  );
});
