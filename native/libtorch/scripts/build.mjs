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
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonBuild } from '../../common/scripts/addon-build.mjs';
import { HOW_TO_FIX, findLibTorch } from './find-libtorch.mjs';

const build = addonBuild({
  packageDir: dirname(dirname(fileURLToPath(import.meta.url))),
  addonFile: 'kiln_libtorch.node',
  label: 'kiln-libtorch',
});
const { addonPath, force, jobs, report, finish } = build;

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

if (!force && build.upToDate()) finish(0, `addon is up to date (${addonPath})`);

const defines = torch.prefix ? [`--CDCMAKE_PREFIX_PATH=${torch.prefix}`] : [];
console.log(
  `[kiln-libtorch] building against LibTorch at ${torch.torchDir} (${torch.source}), ${jobs} jobs`,
);
// Configure every time: cmake-js's build alone skips configuring after a failed configure.
let result = build.cmakeJs('configure', defines);
if (result.status === 0) result = build.cmakeJs('build', [...defines, '--parallel', jobs]);
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
