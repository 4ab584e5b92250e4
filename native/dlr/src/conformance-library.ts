import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PACKAGE_DIR } from './addon-loader.js';

// Test support: builds the conformance implementation of DLR's C API (test-lib/) with the
// system compiler into build/conformance/, keyed by a hash of its sources, so test runs
// compile it once. Never part of an engine's runtime path.

const run = promisify(execFile);
const SOURCE_DIR = join(PACKAGE_DIR, 'test-lib');
const OUT_DIR = join(PACKAGE_DIR, 'build', 'conformance');

interface Recipe {
  readonly compiler: string;
  readonly sources: readonly string[];
  readonly flags: readonly string[];
  readonly output: string;
}

/** Builds (or reuses) test-lib's libdlr.so and returns its path. Throws with the compiler's output. */
export async function buildConformanceLibrary(): Promise<string> {
  const sources = (await readdir(SOURCE_DIR)).filter((f) => f.endsWith('.cc')).sort();
  return build({
    compiler: process.env.CXX ?? 'c++',
    sources,
    flags: ['-std=c++17', '-O0', '-shared', '-fPIC', '-fvisibility=hidden', '-pthread'],
    output: 'libdlr.so',
  });
}

/**
 * Builds (or reuses) test-lib's concurrency probe, a C program that runs one handle from two
 * threads at once to show that the conformance library catches it. Returns its path.
 */
export async function buildConcurrencyProbe(): Promise<string> {
  return build({
    compiler: process.env.CC ?? 'cc',
    sources: ['concurrency_probe.c'],
    flags: ['-O1', '-pthread', '-ldl'],
    output: 'concurrency-probe',
  });
}

async function build(recipe: Recipe): Promise<string> {
  const hash = createHash('sha256');
  hash.update(JSON.stringify(recipe));
  for (const file of (await readdir(SOURCE_DIR)).sort()) {
    hash.update(file);
    hash.update(await readFile(join(SOURCE_DIR, file)));
  }
  const dir = join(OUT_DIR, hash.digest('hex').slice(0, 16));
  const target = join(dir, recipe.output);
  if (existsSync(target)) return target;
  await mkdir(dir, { recursive: true });
  // Parallel test files may build at once: each writes its own file, then renames it into place.
  const partial = join(dir, `.${recipe.output}.${process.pid}.${Date.now()}`);
  const args = [...recipe.sources.map((s) => join(SOURCE_DIR, s)), '-o', partial, ...recipe.flags];
  try {
    await run(recipe.compiler, args, { timeout: 180_000 });
  } catch (error) {
    const detail = error as { stderr?: string; message?: string };
    throw new Error(
      `building ${recipe.output} with ${recipe.compiler} failed: ${detail.stderr || detail.message}`,
      {
        cause: error,
      },
    );
  }
  await rename(partial, target);
  return target;
}
