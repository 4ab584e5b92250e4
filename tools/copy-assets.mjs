// Copies the files tsc does not emit (plain .mjs/.cjs modules such as worker entries and
// translator plugins, .json data) from a package's src/ into its dist/, keeping their paths.
// `tsc -b` alone leaves a package's dist/ without them: its worker threads then fail to start.
// Run as a command, it also writes each package's bundle/ from the dist/ it completed
// (tools/bundle-dist.mjs), which the packages' exports point at: after `tsc -b`, this one
// command makes the built packages whole.
//   node tools/copy-assets.mjs            every workspace package under packages/ and apps/
//   import { copyAssets } from './copy-assets.mjs'; copyAssets(packageDir)
import { cpSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleDist } from './bundle-dist.mjs';

const ASSET = /\.(mjs|cjs|json)$/;
const TEST_ONLY = /(^|\/)test-(support|fixtures)(\/|\.|$)|\.test\./;

export function copyAssets(packageDir) {
  const src = join(packageDir, 'src');
  const visit = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const rel = relative(src, path);
      if (TEST_ONLY.test(rel)) continue;
      if (statSync(path).isDirectory()) visit(path);
      else if (ASSET.test(name)) cpSync(path, join(packageDir, 'dist', rel));
    }
  };
  if (existsSync(src)) visit(src);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  for (const group of ['packages', 'apps']) {
    for (const name of readdirSync(join(root, group))) {
      const dir = join(root, group, name);
      if (!existsSync(join(dir, 'dist'))) continue;
      copyAssets(dir);
      await bundleDist(dir);
    }
  }
}
