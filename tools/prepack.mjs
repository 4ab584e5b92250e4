// Completes a package for `npm pack` / `npm publish`, run from its folder after `tsc -b`
// (its `prepack` script):
//  - copies the files tsc does not emit from src/ into dist/ (tools/copy-assets.mjs);
//  - bundles the entries package.json names into bundle/ (tools/bundle-dist.mjs);
//  - copies the repository's LICENSE;
//  - for a native addon package (package.json `kiln.addon`): copies the shared build helpers
//    into kiln-common/, so that building from source works outside the repository, and the
//    addon built here into prebuilds/<platform>-<arch>/ under node-gyp-build's naming, so that
//    installing on a matching machine needs no compiler.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleDist } from './bundle-dist.mjs';
import { copyAssets } from './copy-assets.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));

ensureBuilt();
copyAssets('.');
await bundleDist('.');
const unbundled = missingTargets('bundle');
if (unbundled.length > 0) throw new Error(`${pkg.name}: not bundled: ${unbundled.join(', ')}`);
cpSync(join(root, 'LICENSE'), 'LICENSE');
if (pkg.kiln?.addon) prepareAddon(pkg.kiln.addon);

/** The files `exports` names that do not exist yet, those under `folder` (dist/, bundle/). */
function missingTargets(folder) {
  return Object.values(pkg.exports ?? {})
    .flatMap((entry) => [entry.types, entry.default])
    .filter((file) => typeof file === 'string' && file.startsWith(`./${folder}/`))
    .filter((file) => !existsSync(file));
}

/**
 * Every file `exports` names in dist/ must exist. `tsc -b` trusts tsconfig.tsbuildinfo, so after
 * dist/ was deleted by hand it emits nothing: then the stale build info goes and tsc runs again.
 */
function ensureBuilt() {
  const targets = () => missingTargets('dist');
  if (targets().length === 0) return;
  rmSync('tsconfig.tsbuildinfo', { force: true });
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  const build = spawnSync(process.execPath, [tsc, '-b'], { stdio: 'inherit' });
  const missing = targets();
  if (build.status !== 0 || missing.length > 0) {
    throw new Error(`${pkg.name}: the build left out ${missing.join(', ') || 'files'}`);
  }
}

function prepareAddon(addonName) {
  rmSync('kiln-common', { recursive: true, force: true });
  for (const part of ['scripts', 'include', 'kiln_napi.cmake']) {
    cpSync(join(root, 'native', 'common', part), join('kiln-common', part), { recursive: true });
  }
  rmSync('prebuilds', { recursive: true, force: true });
  const built = join('build', 'Release', `${addonName}.node`);
  if (!existsSync(built)) {
    if (process.env.KILN_REQUIRE_PREBUILDS === '1') {
      throw new Error(`${pkg.name}: ${built} is missing; build it first (npm run build)`);
    }
    console.warn(`[${pkg.name}] no ${built}: packing without a prebuilt addon`);
    return;
  }
  const glibc = process.report?.getReport().header.glibcVersionRuntime;
  const libc = process.platform === 'linux' ? (glibc ? '.glibc' : '.musl') : '';
  const target = join(
    'prebuilds',
    `${process.platform}-${process.arch}`,
    `${addonName}${libc}.node`,
  );
  cpSync(built, target);
  console.error(`[${pkg.name}] prebuilt addon: ${target}`);
}
