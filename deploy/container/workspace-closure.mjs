// Prints the workspace packages a package needs at run time (itself included), one per line:
// what must be packed for it to install outside the repository.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const workspaces = new Map(
  JSON.parse(execFileSync('npm', ['query', '.workspace', '--silent'], { encoding: 'utf8' })).map(
    (w) => [w.name, w.location],
  ),
);
const seen = new Set();
const visit = (name) => {
  if (seen.has(name) || !workspaces.has(name)) return;
  seen.add(name);
  const manifest = JSON.parse(
    fs.readFileSync(path.join(workspaces.get(name), 'package.json'), 'utf8'),
  );
  for (const dep of Object.keys({
    ...manifest.dependencies,
    ...manifest.optionalDependencies,
    ...manifest.peerDependencies,
  }))
    visit(dep);
};
for (const root of process.argv.slice(2)) visit(root);
console.log([...seen].join('\n'));
