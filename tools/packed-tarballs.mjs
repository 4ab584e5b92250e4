// The tarballs an install from packed packages needs (see pack-all.mjs): a user's
// `npm i @kiln/cli @kiln/engine-onnxruntime` fetches the @kiln packages those depend on from the
// registry; from a folder of tarballs, each of them must be named.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The list pack-all.mjs wrote into `packsDir`. */
export function readPacks(packsDir) {
  return JSON.parse(readFileSync(join(packsDir, 'packs.json'), 'utf8'));
}

/** The tarballs of `names` and of every @kiln package they depend on, directly or not. */
export function tarballsFor(packs, names) {
  const byName = new Map(packs.map((pack) => [pack.name, pack]));
  const needed = new Set();
  const visit = (name) => {
    if (needed.has(name)) return;
    const pack = byName.get(name);
    if (!pack) throw new Error(`${name} was not packed`);
    needed.add(name);
    for (const dependency of pack.kilnDependencies) visit(dependency);
  };
  for (const name of names) visit(name);
  return packs.filter((pack) => needed.has(pack.name)).map((pack) => pack.file);
}
