// The node_modules entries that the GPU kit needs, for bench/gpu/prepare.sh: every package
// the named roots need at run time (dependencies and installed optional dependencies, walked
// from where each is installed), as paths relative to the repository root, one a line.
// Workspace packages (@kiln/*) are listed as their node_modules links; their sources travel
// with the working tree.
//
//   node --import tsx bench/gpu/closure.ts ROOT_DIR PACKAGE...
import { lstatSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

/** The folder `name` is installed in as seen from `fromDir`, the way Node looks it up. */
function installedDir(name: string, fromDir: string): string | undefined {
  for (let dir = fromDir; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    try {
      lstatSync(join(candidate, 'package.json'));
      return candidate;
    } catch {
      if (dirname(dir) === dir) return undefined;
    }
  }
}

/** Paths under `root` (links as they are, folders outermost only) that `roots` need. */
export function closure(root: string, roots: readonly string[]): string[] {
  const entries = new Set<string>();
  const visited = new Set<string>();
  const visit = (name: string, fromDir: string): void => {
    const dir = installedDir(name, fromDir);
    if (!dir) return; // an optional dependency not installed here
    const real = realpathSync(dir);
    if (visited.has(real)) return;
    visited.add(real);
    entries.add(relative(root, dir));
    const manifest = JSON.parse(readFileSync(join(real, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies }))
      visit(dep, real);
  };
  for (const name of roots) visit(name, root);
  // A folder inside another listed one travels with it.
  const sorted = [...entries].sort();
  return sorted.filter(
    (entry) => !sorted.some((other) => other !== entry && entry.startsWith(other + sep)),
  );
}

if (process.argv[1] && realpathSync(process.argv[1]) === realpathSync(new URL(import.meta.url))) {
  const [root, ...roots] = process.argv.slice(2);
  if (!root || roots.length === 0) {
    console.error('usage: node --import tsx bench/gpu/closure.ts ROOT_DIR PACKAGE...');
    process.exit(2);
  }
  for (const entry of closure(realpathSync(root), roots)) console.log(entry);
}
