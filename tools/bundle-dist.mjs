// Bundles a built package's entry modules into bundle/ beside its dist/, one file per entry plus
// shared chunks (esbuild, code splitting, other packages left as imports). Node's ES module
// loader pays for every file it resolves, reads and links: a start of `kiln serve` loaded
// ~380 of Kiln's modules over its two first threads, and reading them from a few bundles instead
// takes ~20 % off the time to its first answer (bench/README.md, startup).
//
// A package names its entries (modules at the top of dist/) in package.json, and points its
// exports at their bundles:
//   "kiln": { "bundle": ["index.js", "prestart.js", "host-thread-main.js"] }
//   "exports": { ".": { …, "default": "./bundle/index.js" } }
// bundle/ sits at the same depth as dist/, so that a top-level module's paths relative to its
// own URL (a worker entry beside it, ../package.json) stay right once bundled, as long as the
// modules those paths name are entries too. A module in a sub-folder of dist/ that resolves
// paths from import.meta.url stays where it is, with every module it imports: the bundles
// import those from dist/, so each module still runs once per thread.
//   node tools/bundle-dist.mjs [packageDir…]   every package under packages/ and apps/ by default
//   import { bundleDist } from './bundle-dist.mjs'; await bundleDist(packageDir)
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

/** The entries a package asks to bundle, from package.json `kiln.bundle`; none when absent. */
export function bundleEntries(packageDir) {
  const pkg = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
  const entries = pkg.kiln?.bundle ?? [];
  for (const entry of entries) {
    if (entry.includes('/') || !entry.endsWith('.js'))
      throw new Error(
        `${pkg.name}: bundle entry ${entry} must be a .js module at the top of dist/`,
      );
  }
  return entries;
}

/**
 * Writes bundle/ for a built package (after `tsc -b` and copyAssets); returns the files it
 * wrote, relative to the package, or [] when the package bundles nothing.
 */
export async function bundleDist(packageDir) {
  const entries = bundleEntries(packageDir);
  if (entries.length === 0) return [];
  const dist = resolve(packageDir, 'dist');
  const out = resolve(packageDir, 'bundle');
  const entryPoints = entries.map((entry) => join(dist, entry));
  const missing = entryPoints.filter((file) => !existsSync(file));
  if (missing.length > 0)
    throw new Error(`${packageDir}: build it first, ${missing.join(', ')} is missing`);
  const common = {
    entryPoints,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    // Other packages, Kiln's included, stay imports: each is one instance per thread.
    packages: 'external',
    splitting: true,
    outdir: out,
    chunkNames: 'chunk-[hash]',
    // The comments naming each module's source then read `dist/…`.
    absWorkingDir: resolve(packageDir),
    logLevel: 'warning',
  };
  const graph = await esbuild.build({ ...common, write: false, metafile: true });
  const staying = modulesThatStay(graph.metafile, resolve(packageDir), dist);
  rmSync(out, { recursive: true, force: true });
  const result = await esbuild.build({
    ...common,
    metafile: true,
    plugins: [keepInDist(staying, out)],
  });
  return Object.keys(result.metafile.outputs).map((file) => file.split(sep).join('/'));
}

/**
 * Modules that must not move: those in a sub-folder of dist/ that read import.meta.url (their
 * paths relative to it would change), and every module they import, so that none of those
 * also runs as a copy inside a bundle.
 */
function modulesThatStay(metafile, base, dist) {
  // The metafile's paths are relative to the build's working folder, the package's.
  const imports = new Map();
  for (const [input, info] of Object.entries(metafile.inputs)) {
    imports.set(
      resolve(base, input),
      info.imports.filter((i) => !i.external).map((i) => resolve(base, i.path)),
    );
  }
  const staying = new Set();
  const visit = (file) => {
    if (staying.has(file)) return;
    staying.add(file);
    for (const next of imports.get(file) ?? []) visit(next);
  };
  for (const file of imports.keys()) {
    if (dirname(file) !== dist && readsPathsFromItsUrl(readFileSync(file, 'utf8'))) visit(file);
  }
  return staying;
}

/**
 * Whether a module's source resolves files relative to its own URL: any use of import.meta.url
 * but a `createRequire(import.meta.url)` that requires packages by name (which resolves the
 * same from anywhere inside the package).
 */
export function readsPathsFromItsUrl(source) {
  const rest = source.replaceAll('createRequire(import.meta.url)', '');
  if (rest.includes('import.meta.url')) return true;
  return rest !== source && /require(?:\.resolve)?\(\s*['"`]\.{1,2}\//.test(source);
}

/** Imports of the modules that stay are left as imports of their dist/ files. */
function keepInDist(staying, out) {
  return {
    name: 'keep-in-dist',
    setup(build) {
      build.onResolve({ filter: /^\.\.?\// }, (args) => {
        const file = resolve(args.resolveDir, args.path);
        if (!staying.has(file)) return undefined;
        // Every output sits at the top of bundle/, so one path serves every chunk.
        return { path: relative(out, file).split(sep).join('/'), external: true };
      });
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const named = process.argv.slice(2);
  const dirs =
    named.length > 0
      ? named
      : ['packages', 'apps'].flatMap((group) =>
          readdirSync(join(root, group)).map((name) => join(root, group, name)),
        );
  for (const dir of dirs) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'dist')))
      await bundleDist(dir);
  }
}
