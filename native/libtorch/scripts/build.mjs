// Builds the LibTorch addon with cmake-js.
//
//   node scripts/build.mjs          the package's install script: builds when LibTorch is
//                                   found and the build is out of date; never fails, so a
//                                   machine without LibTorch still installs (the engine then
//                                   reports itself unavailable, listing what was looked for)
//   node scripts/build.mjs --force  npm run build: always builds, fails loudly
//
// A prebuilt addon (prebuilds/<platform>-<arch>/, shipped in the published package) is used
// when it loads, unless a LibTorch is named explicitly, which is then built against.
//
// Environment: KILN_LIBTORCH_DIR / LIBTORCH / Torch_DIR / KILN_LIBTORCH_PYTHON pick a
// LibTorch (see find-libtorch.mjs); KILN_LIBTORCH_PREBUILDS names another prebuilds folder; KILN_BUILD_JOBS sets parallel jobs (default 2);
// KILN_LIBTORCH_SKIP_BUILD=1 skips the install-time build.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { HOW_TO_FIX, findLibTorch } from './find-libtorch.mjs';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
// The shared helpers: a copy inside the published package, the repository's own otherwise.
const packed = join(packageDir, 'kiln-common', 'scripts', 'addon-build.mjs');
const helpers = existsSync(packed)
  ? packed
  : join(packageDir, '..', 'common', 'scripts', 'addon-build.mjs');
const { addonBuild } = await import(pathToFileURL(helpers).href);

const build = addonBuild({
  packageDir,
  addonFile: 'kiln_libtorch.node',
  label: 'kiln-libtorch',
});
const { addonPath, force, jobs, report, finish } = build;

build.skipIfAsked('KILN_LIBTORCH_SKIP_BUILD', 'the LibTorch addon');

// A LibTorch named explicitly is built against; otherwise a prebuilt addon that loads here
// (its LibTorch libraries present) is used as it is.
const explicit = ['KILN_LIBTORCH_DIR', 'LIBTORCH', 'Torch_DIR', 'KILN_LIBTORCH_PYTHON'].find(
  (name) => process.env[name],
);
const prebuilt = build.prebuilt(process.env.KILN_LIBTORCH_PREBUILDS || undefined);
let prebuiltProblem;
if (!force && !explicit && prebuilt) {
  prebuiltProblem = build.loadProblem(prebuilt);
  if (!prebuiltProblem) {
    report('prebuilt', { addon: prebuilt });
    finish(0, `using the prebuilt addon ${prebuilt}`);
  }
}

const torch = findLibTorch();
if (!torch.found) {
  const reason = prebuiltProblem
    ? `LibTorch not found; the prebuilt addon does not load (${prebuiltProblem})`
    : 'LibTorch not found';
  report('skipped', { reason, searched: torch.searched });
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

// The published package carries a prebuilt addon and no build tools (cmake-js and
// node-addon-api are devDependencies): a build from source asks for them here.
const missingPackages = build.missingBuildPackages();
if (missingPackages.length > 0) {
  const reason = `cannot build the LibTorch addon: missing ${missingPackages.join(' and ')}`;
  report('skipped', { reason, torchDir: torch.torchDir, source: torch.source });
  finish(
    1,
    `${reason}; the PyTorch engine will be unavailable until \`npm rebuild @kiln/libtorch-native --foreground-scripts\` succeeds`,
  );
}

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
