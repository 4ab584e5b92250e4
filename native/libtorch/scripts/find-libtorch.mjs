// Where LibTorch is on this machine, for scripts/build.mjs. Every place looked at is kept,
// so that a failure can list them all.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const CONFIG = 'TorchConfig.cmake';

/** Folders (relative to a LibTorch or Python torch root) that hold TorchConfig.cmake. */
const CONFIG_SUBDIRS = ['share/cmake/Torch', 'lib/cmake/Torch', '.'];

/** Places CMake's find_package(Torch) finds by itself (distribution packages). */
const SYSTEM_CONFIG_DIRS = [
  '/usr/lib/x86_64-linux-gnu/cmake/Torch',
  '/usr/lib/aarch64-linux-gnu/cmake/Torch',
  '/usr/lib/cmake/Torch',
  '/usr/lib64/cmake/Torch',
  '/usr/local/lib/cmake/Torch',
  '/usr/local/share/cmake/Torch',
];

/** Conventional unpack locations of the official LibTorch archive. */
const CONVENTIONAL_ROOTS = ['/usr/local/libtorch', '/opt/libtorch'];

/**
 * Finds LibTorch. Returns `{ found, searched, torchDir?, prefix?, source? }`: `torchDir` is the
 * folder holding TorchConfig.cmake; `prefix` is what CMake needs in CMAKE_PREFIX_PATH (absent
 * for system installs, which CMake finds with no settings).
 */
export function findLibTorch(env = process.env) {
  const searched = [];
  const fromRoot = (root, source) => {
    for (const sub of CONFIG_SUBDIRS) {
      const dir = join(root, sub);
      searched.push(`${join(dir, CONFIG)} (${source})`);
      if (existsSync(join(dir, CONFIG)))
        return { found: true, searched, torchDir: dir, prefix: root, source };
    }
    return undefined;
  };

  for (const name of ['KILN_LIBTORCH_DIR', 'LIBTORCH']) {
    if (env[name]) {
      const hit = fromRoot(env[name], `$${name}`);
      if (hit) return hit;
    }
  }
  if (env.Torch_DIR) {
    searched.push(`${join(env.Torch_DIR, CONFIG)} ($Torch_DIR)`);
    if (existsSync(join(env.Torch_DIR, CONFIG))) {
      return {
        found: true,
        searched,
        torchDir: env.Torch_DIR,
        prefix: env.Torch_DIR,
        source: '$Torch_DIR',
      };
    }
  }
  if (env.KILN_LIBTORCH_PYTHON) {
    const root = pythonTorchRoot(env.KILN_LIBTORCH_PYTHON, searched);
    if (root) {
      const hit = fromRoot(root, `torch of ${env.KILN_LIBTORCH_PYTHON}`);
      if (hit) return hit;
    }
  }
  // A LibTorch named explicitly and not found there is an error to report, not a reason to
  // build silently against another one.
  if (
    ['KILN_LIBTORCH_DIR', 'LIBTORCH', 'Torch_DIR', 'KILN_LIBTORCH_PYTHON'].some((name) => env[name])
  ) {
    return { found: false, searched };
  }
  for (const dir of SYSTEM_CONFIG_DIRS) {
    searched.push(`${join(dir, CONFIG)} (system)`);
    if (existsSync(join(dir, CONFIG)))
      return { found: true, searched, torchDir: dir, source: 'system' };
  }
  for (const root of CONVENTIONAL_ROOTS) {
    const hit = fromRoot(root, 'conventional location');
    if (hit) return hit;
  }
  return { found: false, searched };
}

/** The folder of the torch package a Python interpreter imports, or undefined. */
function pythonTorchRoot(python, searched) {
  try {
    const out = execFileSync(
      python,
      ['-c', 'import os, torch; print(os.path.dirname(torch.__file__))'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 60_000,
      },
    );
    return out.trim().split('\n').pop();
  } catch (error) {
    searched.push(`import torch with ${python} (failed: ${String(error.message).split('\n')[0]})`);
    return undefined;
  }
}

export const HOW_TO_FIX = [
  'install Debian/Ubuntu LibTorch: apt-get install libtorch-dev',
  'or point at an unpacked LibTorch (https://pytorch.org, CPU or CUDA): KILN_LIBTORCH_DIR=/path/to/libtorch',
  'or use the torch of a Python install: KILN_LIBTORCH_PYTHON=/usr/bin/python3',
  'then rebuild: npm rebuild @kiln/libtorch-native --foreground-scripts',
];
