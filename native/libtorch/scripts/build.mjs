// Builds the LibTorch addon with cmake-js.
//
//   node scripts/build.mjs          the package's install script: builds when LibTorch is
//                                   found and the build is out of date; never fails, so a
//                                   machine without LibTorch still installs (the engine then
//                                   reports itself unavailable, listing what was looked for)
//   node scripts/build.mjs --force  npm run build: always builds, fails loudly
//
// Environment: KILN_LIBTORCH_DIR / LIBTORCH / Torch_DIR / KILN_LIBTORCH_PYTHON pick a
// LibTorch (see find-libtorch.mjs); KILN_BUILD_JOBS sets parallel jobs (default 2);
// KILN_LIBTORCH_SKIP_BUILD=1 skips the install-time build.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HOW_TO_FIX, findLibTorch } from './find-libtorch.mjs';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
const buildDir = join(packageDir, 'build');
const addonPath = join(buildDir, 'Release', 'kiln_libtorch.node');
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

function finish(code, message) {
  console.log(`[kiln-libtorch] ${message}`);
  process.exit(force ? code : 0);
}

if (!force && process.env.KILN_LIBTORCH_SKIP_BUILD === '1') {
  finish(0, 'KILN_LIBTORCH_SKIP_BUILD=1: not building the LibTorch addon');
}

const torch = findLibTorch();
if (!torch.found) {
  report('skipped', { reason: 'LibTorch not found', searched: torch.searched });
  finish(
    1,
    [
      'LibTorch was not found, so the PyTorch engine will be unavailable. Looked for:',
      ...torch.searched.map((s) => `  ${s}`),
      'To fix:',
      ...HOW_TO_FIX.map((s) => `  ${s}`),
    ].join('\n'),
  );
}

if (!force && existsSync(addonPath) && statSync(addonPath).mtimeMs >= newestSource()) {
  finish(0, `addon is up to date (${addonPath})`);
}

const require = createRequire(import.meta.url);
const cmakeJs = join(dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
const jobs = process.env.KILN_BUILD_JOBS ?? '2';
const common = ['--directory', packageDir, '--out', buildDir, '--config', 'Release'];
const defines = [`--CDKILN_NAPI_COMMON=${commonDir}`];
if (torch.prefix) defines.push(`--CDCMAKE_PREFIX_PATH=${torch.prefix}`);

console.log(
  `[kiln-libtorch] building against LibTorch at ${torch.torchDir} (${torch.source}), ${jobs} jobs`,
);
// Configure every time: cmake-js's build alone skips configuring after a failed configure.
const run = (args) =>
  spawnSync(process.execPath, [cmakeJs, ...args], { cwd: packageDir, stdio: 'inherit' });
let result = run(['configure', ...common, ...defines]);
if (result.status === 0) result = run(['build', ...common, ...defines, '--parallel', jobs]);
if (result.status !== 0 || !existsSync(addonPath)) {
  const reason = result.error ? result.error.message : `cmake-js exited with ${result.status}`;
  report('failed', { reason, torchDir: torch.torchDir, source: torch.source });
  finish(
    1,
    `building the LibTorch addon failed (${reason}); the PyTorch engine will be unavailable`,
  );
}
report('built', { torchDir: torch.torchDir, source: torch.source, addon: addonPath });
finish(0, `built ${addonPath}`);
