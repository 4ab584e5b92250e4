import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import type { HostTensor } from './binding.js';
import {
  ADDON_PATH_ENV,
  LibTorchUnavailableError,
  PREBUILDS_ENV,
  addonCandidates,
  loadAddonFrom,
  loadLibTorchBinding,
} from './loader.js';
import { addonProblem } from './test-support.js';

describe('addon loading', () => {
  it('tries an explicit path first, then the package build', () => {
    const candidates = addonCandidates({ [ADDON_PATH_ENV]: '/opt/kiln/kiln_libtorch.node' });
    expect(candidates[0]).toBe('/opt/kiln/kiln_libtorch.node');
    expect(candidates[1]).toMatch(/build[/\\]Release[/\\]kiln_libtorch\.node$/);
  });

  it('then the prebuilt addons for this platform, node-gyp-build style', () => {
    const candidates = addonCandidates({ [PREBUILDS_ENV]: '/opt/prebuilds' });
    const dir = join('/opt/prebuilds', `${process.platform}-${process.arch}`);
    expect(candidates.slice(2)).toEqual([
      ...(process.platform === 'linux' ? [join(dir, 'kiln_libtorch.glibc.node')] : []),
      join(dir, 'kiln_libtorch.node'),
    ]);
  });

  it('lists every place tried, why each failed, and how to fix it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-loader-'));
    const broken = join(dir, 'broken.node');
    writeFileSync(broken, 'not a shared library');
    try {
      const error = (() => {
        try {
          loadAddonFrom([join(dir, 'absent.node'), broken]);
        } catch (e) {
          return e;
        }
      })() as LibTorchUnavailableError;
      expect(error).toBeInstanceOf(LibTorchUnavailableError);
      expect(error.code).toBe('ENGINE_UNAVAILABLE');
      expect(error.searched).toEqual([
        `${join(dir, 'absent.node')}: not found`,
        expect.stringContaining(broken),
      ]);
      expect(error.message).toContain('apt-get install libtorch-dev');
      expect(error.message).toContain('KILN_LIBTORCH_DIR');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const cc = spawnSync('cc', ['--version']).status === 0;

describe.skipIf(process.platform !== 'linux' || !cc)(
  'a prebuilt addon whose libraries are absent',
  () => {
    it('says the addon is there but LibTorch is not, and how to get it', () => {
      // A real shared object linked against a library that is then removed: loading it fails
      // the way the prebuilt addon does on a machine without LibTorch.
      const dir = mkdtempSync(join(tmpdir(), 'kiln-loader-'));
      try {
        writeFileSync(join(dir, 'stub.c'), 'int kiln_stub(void) { return 1; }\n');
        writeFileSync(
          join(dir, 'addon.c'),
          'int kiln_stub(void);\nint kiln_addon(void) { return kiln_stub(); }\n',
        );
        const build = (args: string[]) => execFileSync('cc', args, { cwd: dir, stdio: 'pipe' });
        build(['-shared', '-fPIC', '-o', 'libkiln_stub_torch.so', 'stub.c']);
        build([
          '-shared',
          '-fPIC',
          '-o',
          'kiln_libtorch.node',
          'addon.c',
          '-L.',
          '-lkiln_stub_torch',
        ]);
        rmSync(join(dir, 'libkiln_stub_torch.so'));
        const error = (() => {
          try {
            loadAddonFrom([join(dir, 'kiln_libtorch.node')]);
          } catch (e) {
            return e as LibTorchUnavailableError;
          }
        })();
        expect(error?.searched[0]).toMatch(
          /libkiln_stub_torch\.so: cannot open shared object file/,
        );
        expect(error?.message).toContain('the LibTorch libraries it links against are not');
        expect(error?.message).toContain('apt-get install libtorch-dev');
        expect(error?.message).toContain('npm rebuild @kiln/libtorch-native');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
);

describe.skipIf(addonProblem() !== null)('addon in other threads and processes', () => {
  const [addon] = addonCandidates({});

  it('loads in a child process', () => {
    const out = execFileSync(
      process.execPath,
      ['-e', `console.log(require(${JSON.stringify(addon)}).runtimeInfo().version)`],
      {
        encoding: 'utf8',
      },
    );
    expect(out.trim()).toMatch(/^\d+\.\d+/);
  });

  it('loads in worker threads and runs forward there beside the main thread', async () => {
    const code = `
      const { parentPort } = require('node:worker_threads');
      const t = require(${JSON.stringify(addon)});
      const m = t.ModuleWrap.compile({ source: 'def forward(self, x: Tensor) -> Tensor:\\n    return x * 2.0\\n' });
      m.forward([{ dtype: 'float32', shape: [2], data: Float32Array.of(1, 2) }])
        .then((r) => parentPort.postMessage(Array.from(r.value.data)));
    `;
    const run = () =>
      new Promise<number[]>((resolve, reject) => {
        const worker = new Worker(code, { eval: true });
        worker.once('message', (v: number[]) => void worker.terminate().then(() => resolve(v)));
        worker.once('error', reject);
      });
    expect(await Promise.all([run(), run()])).toEqual([
      [2, 4],
      [2, 4],
    ]);
  });

  it('survives a worker thread terminated while its forward runs', async () => {
    const code = `
      const { parentPort } = require('node:worker_threads');
      const t = require(${JSON.stringify(addon)});
      const m = t.ModuleWrap.compile({ source: 'def forward(self, x: Tensor) -> Tensor:\\n    for _ in range(20):\\n        x = torch.tanh(torch.matmul(x, x))\\n    return x\\n' });
      m.forward([{ dtype: 'float32', shape: [128, 128], data: new Float32Array(16384).fill(0.01) }]);
      parentPort.postMessage('started');
    `;
    for (let i = 0; i < 3; i++) {
      const worker = new Worker(code, { eval: true });
      await new Promise((resolve) => worker.once('message', resolve));
      await worker.terminate();
    }
    // This process is still here, and the addon still runs forwards on this thread.
    const module = loadLibTorchBinding().ModuleWrap.compile({
      source: 'def forward(self, x: Tensor) -> Tensor:\n    return -x\n',
    });
    const { value } = await module.forward([
      { dtype: 'float32', shape: [1], data: Float32Array.of(2) },
    ]);
    expect(Array.from((value as HostTensor).data as Float32Array)).toEqual([-2]);
  });
});
