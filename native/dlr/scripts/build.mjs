// Builds the DLR addon with cmake-js. The addon needs no DLR to build (it opens libdlr at run
// time), so only cmake and a C++ compiler are required.
//
//   node scripts/build.mjs          the package's install script: builds when the addon is out
//                                   of date; never fails, so `npm ci` works on machines without
//                                   cmake or a compiler (the DLR engine then reports itself
//                                   unavailable, quoting build/kiln-build.json)
//   node scripts/build.mjs --force  npm run build: always builds, fails loudly
//
// Environment: KILN_BUILD_JOBS sets parallel jobs (default 2); KILN_DLR_SKIP_BUILD=1 skips the
// install-time build.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
const buildDir = join(packageDir, 'build');
const addonPath = join(buildDir, 'Release', 'kiln_dlr.node');
const reportPath = join(buildDir, 'kiln-build.json');
const commonDir = join(packageDir, '..', 'common');
const force = process.argv.includes('--force');

function report(status, details) {
  mkdirSync(buildDir, { recursive: true });
  writeFileSync(
    reportPath,
    `${JSON.stringify({ status, at: new Date().toISOString(), ...details }, null, 2)}\n`,
  );
}

function finish(code, message) {
  console.log(`[kiln-dlr] ${message}`);
  process.exit(force ? code : 0);
}

/** Newest modification time of the addon's sources (and the shared helpers it includes). */
function newestSource() {
  let newest = 0;
  const visit = (path) => {
    if (!existsSync(path)) return;
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path)) visit(join(path, name));
    } else if (/\.(cc|h|cmake|txt)$/.test(path)) {
      newest = Math.max(newest, stat.mtimeMs);
    }
  };
  visit(join(packageDir, 'src'));
  visit(join(packageDir, 'CMakeLists.txt'));
  visit(commonDir);
  return newest;
}

/** The first of `commands` that runs, or undefined. */
function findTool(commands) {
  for (const command of commands) {
    const probe = spawnSync(command, ['--version'], { stdio: 'ignore' });
    if (!probe.error && probe.status === 0) return command;
  }
  return undefined;
}

if (!force && process.env.KILN_DLR_SKIP_BUILD === '1') {
  finish(0, 'KILN_DLR_SKIP_BUILD=1: not building the DLR addon');
}

if (!force && existsSync(addonPath) && statSync(addonPath).mtimeMs >= newestSource()) {
  finish(0, `addon is up to date (${addonPath})`);
}

const missing = [];
if (!findTool(['cmake'])) missing.push('cmake (apt-get install cmake, brew install cmake)');
if (process.platform !== 'win32' && !findTool([process.env.CXX ?? 'c++', 'g++', 'clang++'])) {
  missing.push('a C++17 compiler (apt-get install g++, xcode-select --install)');
}
if (missing.length > 0) {
  const reason = `cannot build the DLR addon: missing ${missing.join(' and ')}`;
  report('skipped', { reason });
  finish(
    1,
    `${reason}; the DLR engine will be unavailable until \`npm run build -w @kiln/dlr-native\` succeeds`,
  );
}

const require = createRequire(import.meta.url);
const cmakeJs = join(dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
const jobs = process.env.KILN_BUILD_JOBS ?? '2';
const args = [
  cmakeJs,
  'build',
  '--directory',
  packageDir,
  '--out',
  buildDir,
  '--config',
  'Release',
  '--parallel',
  jobs,
  `--CDKILN_NAPI_COMMON=${commonDir}`,
];

console.log(`[kiln-dlr] building the DLR addon, ${jobs} jobs`);
const result = spawnSync(process.execPath, args, { cwd: packageDir, stdio: 'inherit' });
if (result.status !== 0 || !existsSync(addonPath)) {
  const reason = result.error ? result.error.message : `cmake-js exited with ${result.status}`;
  report('failed', { reason });
  finish(1, `building the DLR addon failed (${reason}); the DLR engine will be unavailable`);
}
report('built', { addon: addonPath });
finish(0, `built ${addonPath}`);
