import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { closure } from './closure.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
const RUN_SH = join(HERE, 'run.sh');

const hasNvidiaSmi =
  spawnSync('sh', ['-c', 'command -v nvidia-smi'], { stdio: 'ignore' }).status === 0;

/** A folder of stand-in commands, put first on PATH. */
const fakes = mkdtempSync(join(tmpdir(), 'kiln-gpu-kit-test-'));
afterAll(() => rmSync(fakes, { recursive: true, force: true }));
function fake(name: string, script: string): string {
  const path = join(fakes, name);
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
  return path;
}
fake('nvidia-smi', 'echo "GPU 0: Stand-in GPU (UUID: GPU-0)"');
/** A python whose torch imports but has no CUDA, as on a machine with a CPU-only torch. */
const cpuTorchPython = fake(
  'cpu-torch-python',
  'case "$2" in *torch.version.cuda*) exit 1 ;; *__version__*) echo 2.11.0+cpu ;; esac\nexit 0',
);
const noTorchPython = fake('no-torch-python', 'exit 1');
/** A python whose torch has CUDA but no LibTorch CMake files to build against. */
const noLibTorchPython = fake(
  'no-libtorch-python',
  'case "$2" in *cmake_prefix_path*) echo /nonexistent/cmake ;; esac\nexit 0',
);

function runSh(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync('bash', [RUN_SH, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, KILN_GPU_KIT_DEVICE: '', ...env },
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}
const withFakeGpu = (env: Record<string, string>) => ({
  PATH: `${fakes}:${process.env.PATH}`,
  ...env,
});

describe('bench/gpu/run.sh', () => {
  it.skipIf(hasNvidiaSmi)('skips with its reason and exit 0 on a machine without a GPU', () => {
    const { status, stdout } = runSh([]);
    expect(stdout).toMatch(/^skipped: no nvidia-smi on PATH: no NVIDIA GPU here/);
    expect(status).toBe(0);
  });

  it('skips when no Python imports torch', () => {
    const { status, stdout } = runSh([], withFakeGpu({ KILN_GPU_KIT_PYTHON: noTorchPython }));
    expect(stdout).toBe(
      `skipped: no Python with torch (tried: ${noTorchPython}; set KILN_GPU_KIT_PYTHON)\n`,
    );
    expect(status).toBe(0);
  });

  it("skips when Python's torch has no CUDA", () => {
    const { status, stdout } = runSh([], withFakeGpu({ KILN_GPU_KIT_PYTHON: cpuTorchPython }));
    expect(stdout).toBe(
      `skipped: ${cpuTorchPython}'s torch 2.11.0+cpu has no CUDA or does not see cuda:0\n`,
    );
    expect(status).toBe(0);
  });

  it("skips when Python's torch holds no LibTorch to build against", () => {
    const { status, stdout } = runSh([], withFakeGpu({ KILN_GPU_KIT_PYTHON: noLibTorchPython }));
    expect(stdout).toBe(
      `skipped: no CUDA LibTorch: ${noLibTorchPython}'s torch has no /nonexistent/cmake/Torch/TorchConfig.cmake\n`,
    );
    expect(status).toBe(0);
  });

  it('refuses unknown arguments and devices with exit 2', () => {
    expect(runSh(['--fast'])).toMatchObject({
      status: 2,
      stderr: expect.stringMatching(/unknown argument --fast/),
    });
    expect(runSh([], { KILN_GPU_KIT_DEVICE: 'gpu0' })).toMatchObject({
      status: 2,
      stderr: expect.stringMatching(/must be cpu or cuda:N, not gpu0/),
    });
  });

  it('explains itself with --help', () => {
    const { status, stdout } = runSh(['--help']);
    expect(status).toBe(0);
    expect(stdout).toMatch(/^The GPU kit:/);
    expect(stdout).toMatch(/skipped: <reason>/);
  });
});

describe('bench/gpu/closure.ts', () => {
  it("lists a package with what it needs, links to the workspace's packages as links", () => {
    const entries = closure(ROOT, ['@kiln/engine-libtorch', 'cmake-js']);
    expect(entries).toContain('node_modules/@kiln/engine-libtorch');
    expect(entries).toContain('node_modules/@kiln/core');
    expect(entries).toContain('node_modules/@kiln/libtorch-native');
    expect(entries).toContain('node_modules/cmake-js');
    // cmake-js's own dependencies, where npm put them.
    expect(entries.some((e) => /(^|\/)node_modules\/yargs$/.test(e))).toBe(true);
    // Never a folder twice: nested node_modules travel inside their package.
    expect(entries.every((e) => !entries.some((o) => o !== e && e.startsWith(`${o}/`)))).toBe(true);
  });
});
