// What the published package.json files promise a user's `npm i`, read without packing: every
// engine is an optional peer of the server and the CLI, and installing a native addon's
// package pulls in no build tools (they are needed only to build from source).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const manifest = (dir: string): Manifest =>
  JSON.parse(fs.readFileSync(path.join(ROOT, dir, 'package.json'), 'utf8')) as Manifest;

const ENGINES = fs
  .readdirSync(path.join(ROOT, 'packages'))
  .filter((dir) => dir.startsWith('engine-'))
  .map((dir) => manifest(path.join('packages', dir)).name);

/** Packages only a build from source needs. */
const BUILD_TOOLS = ['cmake-js', 'node-addon-api', 'node-gyp'];

describe('package manifests', () => {
  it('finds the engines', () => {
    expect(ENGINES).toEqual(
      expect.arrayContaining(['@kiln/engine-onnxruntime', '@kiln/engine-python']),
    );
  });

  it.each(['apps/cli', 'apps/server'])('%s lists every engine as an optional peer', (dir) => {
    const { peerDependencies = {}, peerDependenciesMeta = {} } = manifest(dir);
    expect(Object.keys(peerDependencies).sort()).toEqual([...ENGINES].sort());
    for (const engine of ENGINES) expect(peerDependenciesMeta[engine]?.optional).toBe(true);
  });

  it.each(['native/libtorch', 'native/dlr', 'native/shared-file'])(
    '%s keeps its build tools out of what installing it pulls in',
    (dir) => {
      const { dependencies = {}, devDependencies = {} } = manifest(dir);
      for (const tool of BUILD_TOOLS) expect(dependencies).not.toHaveProperty(tool);
      // The repository's own builds still get them.
      expect(devDependencies).toHaveProperty('cmake-js');
      expect(devDependencies).toHaveProperty('node-addon-api');
    },
  );

  it('@kiln/engine-libtorch pulls in no build tools through its dependencies', () => {
    const { dependencies = {} } = manifest('packages/engine-libtorch');
    const native = manifest('native/libtorch');
    expect(dependencies).toHaveProperty(native.name);
    for (const tool of BUILD_TOOLS) expect(dependencies).not.toHaveProperty(tool);
  });
});
