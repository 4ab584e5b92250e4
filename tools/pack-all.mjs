// Packs every public workspace package into one folder, exactly as `npm publish` would upload
// it (each package's prepack builds it first):
//
//   npm run pack:all -- --out <dir>     (default: ./packs)
//
// Writes <dir>/<scope>-<name>-<version>.tgz per package and <dir>/packs.json, a list of
// { name, version, file, size, unpackedSize, entryCount, kilnDependencies } that installers and
// tests read (tools/packed-tarballs.mjs picks the tarballs an install needs from it).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({ options: { out: { type: 'string', default: 'packs' } } });
const out = resolve(values.out);
mkdirSync(out, { recursive: true });

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const packages = publicWorkspaces();
const stdout = execFileSync(
  npm,
  [
    'pack',
    '--json',
    '--pack-destination',
    out,
    ...packages.flatMap((p) => ['--workspace', p.name]),
  ],
  { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 },
);
// Lifecycle scripts print to the same stdout; npm's JSON report is the last thing written.
const report = JSON.parse(stdout.slice(stdout.search(/^\[\s*\{/m)));
const packs = report.map(({ name, version, filename, size, unpackedSize, entryCount }) => ({
  name,
  version,
  file: join(out, filename.replace(/^@/, '').replace('/', '-')),
  size,
  unpackedSize,
  entryCount,
  kilnDependencies: kilnDependencies(packages.find((p) => p.name === name).dir),
}));
writeFileSync(join(out, 'packs.json'), `${JSON.stringify(packs, null, 2)}\n`);
for (const p of packs) {
  console.log(
    `${p.name.padEnd(28)} ${(p.size / 1024).toFixed(0).padStart(6)} KiB packed ${(p.unpackedSize / 1024).toFixed(0).padStart(6)} KiB unpacked  ${p.entryCount} files`,
  );
}
console.log(`${packs.length} packages in ${out}`);

/** The @kiln packages a package depends on (not its optional peers: the engines a user picks). */
function kilnDependencies(dir) {
  const { dependencies = {} } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  return Object.keys(dependencies).filter((name) => name.startsWith('@kiln/'));
}

/** Workspaces (from the root package.json's globs) that are not private. */
function publicWorkspaces() {
  const query = execFileSync(npm, ['query', '.workspace'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  return JSON.parse(query)
    .filter((p) => !p.private)
    .map((p) => ({ name: p.name, dir: p.path }))
    .filter((p) => JSON.parse(readFileSync(join(p.dir, 'package.json'), 'utf8')).name === p.name);
}
