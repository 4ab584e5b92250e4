// Builds the DLR addon with cmake-js. The addon needs no DLR to build (it opens libdlr at run
// time), so only cmake and a C++ compiler are required.
//
//   node scripts/build.mjs          the package's install script: builds when the addon is out
//                                   of date; never fails, so `npm ci` works on machines without
//                                   cmake or a compiler (the DLR engine then reports itself
//                                   unavailable, quoting build/kiln-build.json)
//   node scripts/build.mjs --force  npm run build: always builds, fails loudly
//
// A prebuilt addon (prebuilds/<platform>-<arch>/, shipped in the published package) is used
// when it loads; building from source happens only when none fits.
//
// Environment: KILN_DLR_PREBUILDS names another prebuilds folder; KILN_BUILD_JOBS sets parallel jobs (default 2); KILN_DLR_SKIP_BUILD=1 skips the
// install-time build.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const packageDir = dirname(dirname(fileURLToPath(import.meta.url)));
// The shared helpers: a copy inside the published package, the repository's own otherwise.
const packed = join(packageDir, 'kiln-common', 'scripts', 'addon-build.mjs');
const helpers = existsSync(packed)
  ? packed
  : join(packageDir, '..', 'common', 'scripts', 'addon-build.mjs');
const { addonBuild } = await import(pathToFileURL(helpers).href);

const build = addonBuild({
  packageDir,
  addonFile: 'kiln_dlr.node',
  label: 'kiln-dlr',
});
const { addonPath, force, finish } = build;

build.skipIfAsked('KILN_DLR_SKIP_BUILD', 'the DLR addon');

if (!force && build.upToDate()) finish(0, `addon is up to date (${addonPath})`);

// The prebuilt addon needs no DLR to load (libdlr is opened at run time): use it when it loads.
build.usePrebuiltIfItLoads(process.env.KILN_DLR_PREBUILDS || undefined);

build.buildFromSource({
  what: 'the DLR addon',
  unavailable: 'the DLR engine will be unavailable',
  packageName: '@kiln/dlr-native',
  missing: build.missingBuildPackages(),
});
