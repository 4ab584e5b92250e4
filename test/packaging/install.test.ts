// Installs Kiln as its users do: every public package packed exactly as `npm publish` would
// upload it (`npm run pack:all`), then installed from those tarballs into fresh folders outside
// the repository (third-party dependencies come from the npm registry), and used there.
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import jpeg from 'jpeg-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resnetModel } from '@kiln/model-tools';
import { type Pack, readPacks, tarballsFor } from '../../tools/packed-tarballs.mjs';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const NODE_TYPES = path.join(ROOT, 'node_modules', '@types');
const LIBTORCH_ADDON = path.join(
  ROOT,
  'native',
  'libtorch',
  'build',
  'Release',
  'kiln_libtorch.node',
);
const DLR_ADDON = path.join(ROOT, 'native', 'dlr', 'build', 'Release', 'kiln_dlr.node');
const REQUIRED_ENGINES = (process.env.KILN_REQUIRE_ENGINES ?? '').toLowerCase().split(',');

let work: string;
let packs: Pack[];

/**
 * What `npm i <names>` needs from the folder of tarballs: the named packages and the @kiln
 * packages they depend on, which a registry would supply.
 */
function tarballs(...names: string[]): string[] {
  return tarballsFor(packs, names);
}

/** The environment of a user's shell: none of the outer npm run's settings leak in. */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !/^npm_|^NODE_OPTIONS$|^VITEST/i.test(key)),
  );
  return {
    ...env,
    // The demo model is built afresh here; npm keeps the user's own cache.
    KILN_HOME: path.join(work, 'kiln-home'),
    // onnxruntime-node's install script would fetch GPU providers from outside the registry.
    ONNXRUNTIME_NODE_INSTALL: 'skip',
    ...extra,
  };
}

/** A fresh project folder with `npm i <specs>` done in one command; returns what npm reported. */
async function project(
  name: string,
  specs: string[],
  env: Record<string, string> = {},
): Promise<{ dir: string; added: number; log: string }> {
  const dir = path.join(work, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name, private: true, type: 'module' }),
  );
  const { stdout, stderr } = await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--foreground-scripts', ...specs],
    { cwd: dir, env: userEnv(env), maxBuffer: 64 << 20 },
  );
  const added = Number(/added (\d+) packages?/.exec(stdout)?.[1] ?? Number.NaN);
  return { dir, added, log: stdout + stderr };
}

/** Bytes under a folder (symlinks not followed). */
function duBytes(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += duBytes(full);
    else if (entry.isFile()) total += fs.statSync(full).size;
  }
  return total;
}

function record(line: string): void {
  console.log(`[packaging] ${line}`);
}

const MiB = 1024 * 1024;

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-packaging-'));
  await run(
    process.execPath,
    [path.join(ROOT, 'tools', 'pack-all.mjs'), '--out', path.join(work, 'packs')],
    {
      cwd: ROOT,
      env: userEnv(),
      maxBuffer: 64 << 20,
    },
  );
  packs = readPacks(path.join(work, 'packs'));
}, 300_000);

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('the packed tarballs', () => {
  it('hold built JS and types, a LICENSE, and no TypeScript sources or tests', () => {
    expect(packs.length).toBeGreaterThanOrEqual(14);
    for (const pack of packs) {
      const listing = spawnSync('tar', ['tzf', pack.file], { encoding: 'utf8' });
      const files = listing.stdout.split('\n').filter(Boolean);
      const offending = files.filter(
        (f) =>
          /\.test\.|test-support|test-fixtures/.test(f) ||
          (/\.(ts|tsx|mts|cts)$/.test(f) && !/\.d\.ts$/.test(f)),
      );
      expect(offending, pack.name).toEqual([]);
      expect(files, pack.name).toContain('package/LICENSE');
      expect(files, pack.name).toContain('package/dist/index.d.ts');
      const bundled = files.filter((f) => /^package\/bundle\/[^/]+\.js$/.test(f));
      if (bundled.length === 0) {
        expect(files, pack.name).toContain('package/dist/index.js');
        continue;
      }
      // A bundled package carries its entries once, in bundle/: of dist/'s JS only the
      // modules its bundles import from there (tools/bundle-dist.mjs).
      const fromDist = new Set<string>();
      for (const file of bundled) {
        const text = spawnSync('tar', ['xzf', pack.file, '-O', file], { encoding: 'utf8' }).stdout;
        for (const [, target] of text.matchAll(/from "\.\.\/(dist\/[^"]+)"/g))
          fromDist.add(`package/${target}`);
      }
      const distJs = files.filter((f) => /^package\/dist\/.*\.js$/.test(f));
      expect(distJs.sort(), pack.name).toEqual([...fromDist].sort());
    }
  });

  it('weigh at most 4 MB unpacked, all of Kiln together', () => {
    const total = packs.reduce((sum, p) => sum + p.unpackedSize, 0);
    record(
      `${packs.length} tarballs, ${(packs.reduce((s, p) => s + p.size, 0) / MiB).toFixed(2)} MiB packed, ${(total / MiB).toFixed(2)} MiB unpacked`,
    );
    expect(total).toBeLessThanOrEqual(4_000_000);
  });
});

describe('in process: @kiln/core, @kiln/worker-pool and @kiln/engine-onnxruntime', () => {
  let dir: string;
  let modelDir: string;
  let imageFile: string;

  beforeAll(async () => {
    const installed = await project(
      'in-process',
      tarballs('@kiln/core', '@kiln/worker-pool', '@kiln/engine-onnxruntime'),
    );
    dir = installed.dir;
    record(
      `npm i @kiln/core @kiln/worker-pool @kiln/engine-onnxruntime: ${installed.added} packages, node_modules ${(duBytes(path.join(dir, 'node_modules')) / MiB).toFixed(0)} MiB (@kiln ${(duBytes(path.join(dir, 'node_modules', '@kiln')) / MiB).toFixed(2)} MiB)`,
    );
    expect(installed.added).toBeLessThanOrEqual(40);

    modelDir = path.join(work, 'models', 'resnet18');
    await resnetModel(modelDir, { depth: 18, classes: 10 });
    const width = 64;
    const pixels = Buffer.alloc(width * width * 4, 0x80);
    imageFile = path.join(work, 'image.jpg');
    fs.writeFileSync(imageFile, jpeg.encode({ data: pixels, width, height: width }, 90).data);
  }, 300_000);

  /** The README's "Use it in process" block, pointed at the generated model and image. */
  function readmeSnippet(typed: boolean): string {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Use it in process'));
    const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
    expect(code).toContain('=file:///models/resnet18');
    return [
      "import { readFile } from 'node:fs/promises';",
      code.replace('=file:///models/resnet18', `=${pathToFileURL(modelDir).href}`),
      typed ? '' : 'console.log(JSON.stringify(output));',
    ]
      .join('\n')
      .replace(
        'const pool',
        `const imageBytes${typed ? ': Uint8Array' : ''} = await readFile(${JSON.stringify(imageFile)});\nconst pool`,
      );
  }

  it("runs the README's snippet as plain JavaScript (ESM)", async () => {
    fs.writeFileSync(path.join(dir, 'snippet.mjs'), readmeSnippet(false));
    const { stdout } = await run(process.execPath, ['snippet.mjs'], { cwd: dir, env: userEnv() });
    const output = JSON.parse(stdout) as { type: string; value: { className: string }[] };
    expect(output.type).toBe('json');
    expect(output.value.length).toBeGreaterThan(0);
    expect(output.value[0]).toHaveProperty('className');
  });

  it("type-checks the README's snippet as TypeScript (nodenext, no skipLibCheck)", async () => {
    fs.writeFileSync(path.join(dir, 'snippet.ts'), readmeSnippet(true));
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          typeRoots: [NODE_TYPES],
          types: ['node'],
        },
        files: ['snippet.ts'],
      }),
    );
    const check = spawnSync(process.execPath, [TSC, '-p', '.'], { cwd: dir, encoding: 'utf8' });
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
  });

  it('loads with require() from CommonJS', async () => {
    const { stdout } = await run(
      process.execPath,
      [
        '-e',
        "const { EngineRegistry } = require('@kiln/core'); const { provider } = require('@kiln/engine-onnxruntime'); console.log(typeof EngineRegistry, provider.name)",
      ],
      { cwd: dir, env: userEnv() },
    );
    expect(stdout.trim()).toBe('function OnnxRuntime');
  });

  it('gives two worker threads one copy of the weights, from the prebuilt addon', async () => {
    const script = `
      import { createWorkerPool } from '@kiln/worker-pool';
      const pool = await createWorkerPool({
        model: { url: 'resnet::OnnxRuntime=${pathToFileURL(modelDir).href}', engines: ['@kiln/engine-onnxruntime'] },
        settings: { minWorkers: 2, maxWorkers: 2 },
      });
      const weights = pool.describe().workerGroups[0].workers.map((w) => w.model?.weights);
      console.log(JSON.stringify(weights));
      await pool.shutdown();
    `;
    fs.writeFileSync(path.join(dir, 'shared.mjs'), script);
    const home = path.join(work, 'kiln-home-in-process');
    const { stdout } = await run(process.execPath, ['shared.mjs'], {
      cwd: dir,
      env: userEnv({ KILN_HOME: home }),
    });
    const weights = JSON.parse(stdout.trim().split('\n').at(-1)!) as { shared: boolean }[];
    expect(weights).toHaveLength(2);
    for (const w of weights) expect(w).toMatchObject({ shared: true, bytes: expect.any(Number) });
    const report = JSON.parse(
      fs.readFileSync(
        path.join(dir, 'node_modules', '@kiln', 'shared-file-native', 'build', 'kiln-build.json'),
        'utf8',
      ),
    ) as { status: string };
    expect(report.status).toBe('prebuilt');
    expect(fs.readdirSync(path.join(home, 'onnxruntime')).some((f) => f.endsWith('.ort'))).toBe(
      true,
    );
  });

  it('answers an image sent to a model without translator settings with a clear error', async () => {
    // The whole overrides block: the translator and what it feeds the model.
    const snippet = readmeSnippet(false).replace(/\n\s*overrides: \{[\s\S]*?\n {4}\},/, '');
    expect(snippet).not.toContain('translatorFactory');
    fs.writeFileSync(path.join(dir, 'tensors-only.mjs'), snippet);
    const result = spawnSync(process.execPath, ['tensors-only.mjs'], {
      cwd: dir,
      env: userEnv(),
      encoding: 'utf8',
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('the body is a JPEG image, but this model takes tensors');
  });
});

describe('the server and the CLI with ONNX Runtime only', () => {
  let dir: string;
  let server: ChildProcess | undefined;

  beforeAll(async () => {
    const installed = await project('cli', tarballs('@kiln/cli', '@kiln/engine-onnxruntime'));
    dir = installed.dir;
    record(
      `npm i @kiln/cli @kiln/engine-onnxruntime: ${installed.added} packages, node_modules ${(duBytes(path.join(dir, 'node_modules')) / MiB).toFixed(0)} MiB`,
    );
    expect(fs.existsSync(path.join(dir, 'node_modules', '@kiln', 'engine-libtorch'))).toBe(false);
  }, 300_000);

  afterAll(() => {
    // npx and the server it started form their own process group.
    if (server?.pid) process.kill(-server.pid, 'SIGTERM');
  });

  it("`npx kiln serve --demo` answers the README's curl", async () => {
    const started = await npxKilnServe(dir, ['--demo']);
    server = started.server;
    await waitForOutput(server, /model iris READY/);
    const answer = await curlIris(started.inference);
    expect(answer[0]!.className).toBe('virginica');
    expect(answer[0]!.probability).toBeGreaterThan(0.9);
  });

  it('`npx kiln serve --ingress-processes 2` answers from two processes and stops both', async () => {
    const started = await npxKilnServe(dir, ['--demo', '--ingress-processes', '2']);
    const cluster = started.server;
    try {
      await waitForOutput(cluster, /serving \(2 ingress processes\)[\s\S]*model iris READY/);
      const url = `http://127.0.0.1:${started.metrics}/metrics`;
      const deadline = Date.now() + 60_000;
      const count = async () =>
        /^kiln_ingress_processes (\d+)$/m.exec(await (await fetch(url)).text())?.[1];
      while ((await count()) !== '2' && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await count()).toBe('2');
      // Each curl is a connection of its own: the primary hands them to the processes in turn.
      for (let i = 0; i < 6; i++) {
        expect((await curlIris(started.inference))[0]!.className).toBe('virginica');
      }
    } finally {
      const exited = new Promise((resolve) => cluster.once('exit', resolve));
      process.kill(-cluster.pid!, 'SIGTERM');
      await exited;
    }
  });

  it('names the package to install for a model on an absent engine', async () => {
    const demo = path.join(work, 'kiln-home', 'demo', 'iris');
    const result = spawnSync(
      'npx',
      ['kiln', 'predict', '-m', `iris::PyTorch=${pathToFileURL(demo).href}`, '-i', '-'],
      { cwd: dir, env: userEnv(), input: '[6.7, 3.0, 5.2, 2.3]', encoding: 'utf8' },
    );
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/install @kiln\/engine-libtorch/);
  });

  it('`npx kiln-make-models` writes a model folder', async () => {
    const out = path.join(work, 'models', 'tiny');
    await run('npx', ['kiln-make-models', 'tiny', out], { cwd: dir, env: userEnv() });
    expect(fs.existsSync(path.join(out, 'model.onnx'))).toBe(true);
  });

  it('`npx kiln-bench --help` prints its usage', async () => {
    const { stdout } = await run('npx', ['kiln-bench', '--help'], { cwd: dir, env: userEnv() });
    expect(stdout).toMatch(/^Usage: kiln-bench/m);
  });
});

describe('the server and the CLI with Python mode only', () => {
  let dir: string;
  let server: ChildProcess | undefined;

  beforeAll(async () => {
    const installed = await project('python-only', tarballs('@kiln/cli', '@kiln/engine-python'));
    dir = installed.dir;
    expect(fs.existsSync(path.join(dir, 'node_modules', '@kiln', 'engine-onnxruntime'))).toBe(
      false,
    );
  }, 300_000);

  afterAll(() => {
    if (server?.pid) process.kill(-server.pid, 'SIGTERM');
  });

  it('`npx kiln serve` serves a model.py without ONNX Runtime installed', async () => {
    const model = path.join(work, 'models', 'echo-py');
    fs.mkdirSync(model, { recursive: true });
    fs.writeFileSync(
      path.join(model, 'model.py'),
      [
        'from djl_python import Input, Output',
        'def handle(inputs: Input):',
        '    if inputs.is_empty():',
        '        return None',
        "    return Output().add_as_json({'doubled': [2 * x for x in inputs.get_as_json()]})",
        '',
      ].join('\n'),
    );
    // A large body reaches the handler through shared memory (the prebuilt addon).
    const digest = path.join(work, 'models', 'digest-py');
    fs.mkdirSync(digest, { recursive: true });
    fs.writeFileSync(
      path.join(digest, 'model.py'),
      [
        'import hashlib',
        'from djl_python import Input, Output',
        'def handle(inputs: Input):',
        '    if inputs.is_empty():',
        '        return None',
        '    body = inputs.get_as_bytes()',
        "    return Output().add_as_json({'bytes': len(body), 'sha256': hashlib.sha256(body).hexdigest()})",
        '',
      ].join('\n'),
    );
    const started = await npxKilnServe(dir, [
      '-m',
      `echo=${pathToFileURL(model).href}`,
      '-m',
      `digest=${pathToFileURL(digest).href}`,
    ]);
    server = started.server;
    // Both lines, in whichever order the two models finish loading.
    await waitForOutput(server, /^(?=[\s\S]*model echo READY)(?=[\s\S]*model digest READY)/);
    const body = path.join(work, 'body.bin');
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256));
    fs.writeFileSync(body, bytes);
    const large = await run('curl', [
      '-sS',
      '-X',
      'POST',
      `http://127.0.0.1:${started.inference}/predictions/digest`,
      '-H',
      'Content-Type: application/octet-stream',
      '--data-binary',
      `@${body}`,
    ]);
    expect(JSON.parse(large.stdout)).toEqual({
      bytes: 300_000,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    });
    const curl = await run('curl', [
      '-sS',
      '-X',
      'POST',
      `http://127.0.0.1:${started.inference}/predictions/echo`,
      '-H',
      'Content-Type: application/json',
      '-d',
      '[1, 2.5]',
    ]);
    expect(JSON.parse(curl.stdout)).toEqual({ doubled: [2, 5] });
  }, 180_000);
});

const libtorchRequired = REQUIRED_ENGINES.includes('pytorch');
const libtorchBuilt = fs.existsSync(LIBTORCH_ADDON);
if (!libtorchBuilt) {
  console.log(
    `skipping the install with LibTorch present: no ${LIBTORCH_ADDON} was built here to ship as the prebuilt addon`,
  );
}

describe('@kiln/engine-libtorch', () => {
  const specs = () => tarballs('@kiln/engine-libtorch');
  const loadEngine = `
    import { provider } from '@kiln/engine-libtorch';
    try {
      const engine = await provider.load();
      const { loadLibTorchBinding } = await import('@kiln/libtorch-native');
      const module = loadLibTorchBinding().ModuleWrap.compile({
        source: 'def forward(self, x: Tensor) -> Tensor:\\n    return x * 2.0\\n',
      });
      const { value } = await module.forward([{ dtype: 'float32', shape: [2], data: Float32Array.of(1, 2) }]);
      console.log(JSON.stringify({ ok: true, engine: engine.name, out: Array.from(value.data) }));
    } catch (error) {
      console.log(JSON.stringify({ ok: false, message: error.message }));
    }`;

  it.skipIf(!libtorchBuilt && !libtorchRequired)(
    'installs with LibTorch present from the prebuilt addon, no compiler run, and runs TorchScript',
    async () => {
      const installed = await project('libtorch', specs());
      expect(installed.log).toMatch(
        /using the prebuilt addon .*prebuilds\/linux-x64\/kiln_libtorch\.glibc\.node/,
      );
      fs.writeFileSync(path.join(installed.dir, 'load.mjs'), loadEngine);
      const { stdout } = await run(process.execPath, ['load.mjs'], {
        cwd: installed.dir,
        env: userEnv(),
      });
      expect(JSON.parse(stdout)).toEqual({ ok: true, engine: 'PyTorch', out: [2, 4] });
    },
    300_000,
  );

  it('installs without LibTorch and says why the engine is unavailable and how to fix it', async () => {
    // No LibTorch for this install: the one named does not exist, and the prebuilt addon
    // (linked against a LibTorch) is looked for in an empty folder.
    const empty = fs.mkdtempSync(path.join(work, 'no-prebuilds-'));
    const env = {
      KILN_LIBTORCH_DIR: path.join(work, 'no-libtorch'),
      KILN_LIBTORCH_PREBUILDS: empty,
    };
    const installed = await project('no-libtorch', specs(), env);
    expect(installed.log).toMatch(
      /LibTorch was not found, so the PyTorch engine will be unavailable/,
    );
    fs.writeFileSync(path.join(installed.dir, 'load.mjs'), loadEngine);
    const { stdout } = await run(process.execPath, ['load.mjs'], {
      cwd: installed.dir,
      env: userEnv(env),
    });
    const result = JSON.parse(stdout) as { ok: boolean; message: string };
    expect(result.ok).toBe(false);
    expect(result.message).toContain('the LibTorch addon could not be loaded');
    expect(result.message).toContain('skipped: LibTorch not found');
    expect(result.message).toContain('npm rebuild @kiln/libtorch-native');
    expect(result.message).not.toContain(' -w ');
  }, 300_000);
});

const dlrBuilt = fs.existsSync(DLR_ADDON);
if (!dlrBuilt) {
  console.log(
    `skipping the DLR install: no ${DLR_ADDON} was built here to ship as the prebuilt addon`,
  );
}

describe('@kiln/engine-dlr', () => {
  it.skipIf(!dlrBuilt && !REQUIRED_ENGINES.includes('dlr'))(
    'installs from the prebuilt addon and, without libdlr, says where it looked and how to fix it',
    async () => {
      const installed = await project('dlr', tarballs('@kiln/engine-dlr'));
      expect(installed.log).toMatch(
        /using the prebuilt addon .*prebuilds\/linux-x64\/kiln_dlr\.glibc\.node/,
      );
      fs.writeFileSync(
        path.join(installed.dir, 'load.mjs'),
        `import { provider } from '@kiln/engine-dlr';
       try { await provider.load(); console.log('loaded'); } catch (error) { console.log(error.message); }`,
      );
      const { stdout } = await run(process.execPath, ['load.mjs'], {
        cwd: installed.dir,
        env: userEnv({ KILN_DLR_LIBRARY: path.join(work, 'no-dlr', 'libdlr.so') }),
      });
      expect(stdout).toMatch(/DLR \(libdlr\) could not be loaded/);
      expect(stdout).toMatch(/To fix: install DLR/);
    },
    300_000,
  );
});

/**
 * Starts `npx kiln serve <args>` in an installed project on free loopback ports. The server and
 * npx form their own process group (kill `-pid` to stop both).
 */
async function npxKilnServe(
  dir: string,
  args: string[],
): Promise<{ server: ChildProcess; inference: number; metrics: number }> {
  const [inference, management, metrics] = await freePorts(3);
  const server = spawn(
    'npx',
    [
      'kiln',
      'serve',
      ...args,
      '--inference-address',
      `http://127.0.0.1:${inference}`,
      '--management-address',
      `http://127.0.0.1:${management}`,
      '--metrics-address',
      `http://127.0.0.1:${metrics}`,
    ],
    { cwd: dir, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  return { server, inference: inference!, metrics: metrics! };
}

/** The README's curl: one Iris flower to the demo model, on a connection of its own. */
async function curlIris(
  inferencePort: number,
): Promise<{ className: string; probability: number }[]> {
  const curl = await run('curl', [
    '-sS',
    '-X',
    'POST',
    `http://127.0.0.1:${inferencePort}/predictions/iris`,
    '-H',
    'Content-Type: application/json',
    '-d',
    '[6.7, 3.0, 5.2, 2.3]',
  ]);
  return JSON.parse(curl.stdout) as { className: string; probability: number }[];
}

/** Loopback ports nothing listens on right now. */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve) => {
          const s = createServer();
          s.listen(0, '127.0.0.1', () => resolve(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

function waitForOutput(child: ChildProcess, ready: RegExp, timeoutMs = 120_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(
      () => reject(new Error(`timed out waiting for ${ready}; output:\n${seen}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (ready.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before ${ready}; output:\n${seen}`));
    });
  });
}
