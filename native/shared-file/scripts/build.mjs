// Builds the shared-file addon with cmake-js (only cmake and a C++ compiler are needed).
//
//   node scripts/build.mjs          the package's install script: builds when the addon is out
//                                   of date; never fails, so `npm ci` works on machines without
//                                   cmake or a compiler (engines then give each worker thread
//                                   its own copy of a model's bytes, quoting build/kiln-build.json)
//   node scripts/build.mjs --force  npm run build: always builds, fails loudly
//
// A prebuilt addon (prebuilds/<platform>-<arch>/, shipped in the published package) is used
// when it loads; building from source happens only when none fits.
//
// Environment: KILN_SHARED_FILE_PREBUILDS names another prebuilds folder; KILN_BUILD_JOBS sets
// parallel jobs (default 2); KILN_SHARED_FILE_SKIP_BUILD=1 skips the install-time build.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
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
  addonFile: 'kiln_shared_file.node',
  label: 'kiln-shared-file',
});
const { addonPath, force, finish } = build;

build.skipIfAsked('KILN_SHARED_FILE_SKIP_BUILD', 'the shared-file addon');

if (!force && build.upToDate()) finish(0, `addon is up to date (${addonPath})`);

build.usePrebuiltIfItLoads(process.env.KILN_SHARED_FILE_PREBUILDS || undefined);

// The published package carries prebuilt addons and no build tools: installing it adds no
// other package. Building elsewhere needs cmake-js and node-addon-api installed beside it.
const require = createRequire(join(packageDir, 'package.json'));
const missingPackages = ['cmake-js', 'node-addon-api'].flatMap((tool) => {
  try {
    require.resolve(`${tool}/package.json`);
    return [];
  } catch {
    return [`the ${tool} package (npm install --no-save cmake-js node-addon-api)`];
  }
});
build.buildFromSource({
  what: 'the shared-file addon',
  unavailable: "worker threads will each hold their own copy of a model's bytes",
  packageName: '@kiln/shared-file-native',
  missing: missingPackages,
});
