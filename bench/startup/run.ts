/**
 * Start-up and memory of `kiln serve` against the hand-written Koa + onnxruntime-node server
 * (bench/server/naive-server.mjs), on ResNet-18 (random weights):
 * - start → first successful prediction: each server is started, a 1×3×224×224 npy body is
 *   POSTed until it answers 200; contenders alternate over the rounds (goal: Kiln ≤ 1.3×
 *   naive). Kiln runs as users install it — the packed tarballs (tools/pack-all.mjs) installed
 *   with npm into a fresh folder, `@kiln/cli` with `@kiln/engine-onnxruntime` — and, for
 *   reference, as built in the repository (`apps/cli/dist`, made by `tsc -b` first; its
 *   node_modules hold the other engines and the development tools too) and from the
 *   repository's TypeScript sources. Kiln keeps ONNX models optimized for weight sharing under
 *   $KILN_HOME: "Kiln" starts with the entry the warm-up round left there (every start but the
 *   first on a machine), "Kiln, first start" (installed) with an empty $KILN_HOME each time.
 * - RSS of the installed Kiln's process with 4 workers ÷ with 1 (minWorkers = maxWorkers),
 *   read from /proc after 8 predictions (goal ≤ 1.3).
 * - Memory of `kiln serve` with 2 ingress processes against 1 (one worker each): PSS summed
 *   over the process tree, so that pages the processes share (the mapped weights) count once.
 *
 *   node -C @kiln/source --import tsx bench/startup/run.ts [--rounds 3]
 */
import { type ChildProcess, execFileSync, fork } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Tensor, encodeNpy } from '@kiln/core';
import { resnetModel } from '@kiln/model-tools';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { readPacks, tarballsFor } from '../../tools/packed-tarballs.mjs';
import {
  KILN_BUILT,
  KILN_SOURCE,
  allProcessesReady,
  buildKilnCli,
  kilnServeArgs,
  spawnKiln,
  stopChild,
} from '../server/contenders.js';

const { values: args } = parseArgs({
  options: { rounds: { type: 'string', default: '3' } },
});
const rounds = Number(args.rounds);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NAIVE = join(ROOT, 'bench/server/naive-server.mjs');

let nextPort = 19100;

async function firstPrediction(
  url: string,
  body: Buffer,
  started: number,
  server?: ChildProcess & { stderrTail?: () => string },
): Promise<number> {
  const deadline = performance.now() + 120_000;
  for (;;) {
    // A server that died or never answers stops the bench with what it said, not a hang.
    if (server && (server.exitCode !== null || server.signalCode !== null))
      throw new Error(
        `${url}: the server exited (${server.exitCode ?? server.signalCode}) before answering\n${server.stderrTail?.() ?? ''}`,
      );
    if (performance.now() > deadline)
      throw new Error(`${url}: no answer in 120 s\n${server?.stderrTail?.() ?? ''}`);
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-npy', accept: 'application/x-npy' },
        body,
      });
      await response.arrayBuffer();
      if (response.status === 200) return performance.now() - started;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function startKiln(
  entry: string,
  modelDir: string,
  kilnHome: string,
  env: Readonly<Record<string, string>> = {},
): { child: ChildProcess & { stderrTail: () => string }; url: string; metricsUrl: string } {
  const port = (nextPort += 3);
  const spawned = spawnKiln(entry, kilnServeArgs('resnet', modelDir, port), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { KILN_HOME: kilnHome, ...env },
  });
  // What it last wrote to stderr, for a start that fails; its log lines on stdout are dropped.
  let stderr = '';
  spawned.stdout!.resume();
  spawned.stderr!.on(
    'data',
    (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)),
  );
  const child = Object.assign(spawned, { stderrTail: () => stderr });
  return {
    child,
    url: `http://127.0.0.1:${port}/predictions/resnet`,
    metricsUrl: `http://127.0.0.1:${port + 2}/metrics`,
  };
}

/** Proportional set size of a process and its descendants, MiB (shared pages split). */
function pssTreeMiB(pid: number): number {
  const pss = Number(
    /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))![1],
  );
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .split(' ')
    .filter(Boolean)
    .map(Number);
  return pss / 1024 + children.reduce((sum, child) => sum + pssTreeMiB(child), 0);
}

function startNaive(modelDir: string): { child: ChildProcess; url: string } {
  const port = (nextPort += 3);
  const child = fork(NAIVE, [join(modelDir, 'model.onnx'), String(port)], {
    execArgv: [],
    stdio: 'ignore',
  });
  return { child, url: `http://127.0.0.1:${port}/` };
}

/**
 * Kiln as its users install it: every public package packed as `npm publish` would upload it,
 * then `npm install` of the CLI with ONNX Runtime's engine (and the Kiln packages they need,
 * from the same tarballs) into a fresh folder. Returns the installed CLI's entry.
 */
function installPackedKiln(dir: string): string {
  const packsDir = join(dir, 'packs');
  execFileSync(process.execPath, [join(ROOT, 'tools/pack-all.mjs'), '--out', packsDir], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const project = join(dir, 'installed');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ private: true, type: 'module' }));
  execFileSync(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      // What `npm i @kiln/cli @kiln/engine-onnxruntime` brings from a registry.
      ...tarballsFor(readPacks(packsDir), ['@kiln/cli', '@kiln/engine-onnxruntime']),
    ],
    {
      cwd: project,
      // onnxruntime-node's install script would fetch GPU providers from outside the registry.
      env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  return join(project, 'node_modules/@kiln/cli/bundle/main.js');
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-startup-'));
try {
  console.log(`startup: building dist (tsc -b apps/cli) — ${machineLine()}`);
  buildKilnCli();
  console.log('startup: installing the packed tarballs into a fresh folder');
  const installed = installPackedKiln(dir);
  const model = await resnetModel(join(dir, 'resnet'), { depth: 18 });
  const body = Buffer.from(
    encodeNpy(new Tensor('float32', new Float32Array(3 * 224 * 224).fill(0.5), [1, 3, 224, 224])),
  );
  const home = join(dir, 'kiln-home');
  // Its own: the installed ONNX Runtime may be another version, whose optimized models would
  // replace the repository's in a shared cache at every start.
  const installedHome = join(dir, 'kiln-home-installed');
  let homes = 0;
  const freshHome = () => join(dir, `kiln-home-${++homes}`);
  const timed = (start: () => { child: ChildProcess; url: string }) => async () => {
    const started = performance.now();
    const { child, url } = start();
    try {
      return await firstPrediction(url, body, started, child);
    } finally {
      await stopChild(child);
    }
  };
  const ms = await alternateRounds(
    [
      {
        name: 'installed',
        measure: timed(() => startKiln(installed, model.dir, installedHome)),
      },
      { name: 'kiln', measure: timed(() => startKiln(KILN_BUILT, model.dir, home)) },
      { name: 'kiln-first', measure: timed(() => startKiln(installed, model.dir, freshHome())) },
      { name: 'kiln-source', measure: timed(() => startKiln(KILN_SOURCE, model.dir, home)) },
      { name: 'naive', measure: timed(() => startNaive(model.dir)) },
    ],
    { rounds, warmupRounds: 1 },
  );
  console.log(
    `start → first prediction, ResNet-18, ms: Kiln installed ${formatSpread(spreadOf(ms.installed!), 0)}, ` +
      `Kiln (built in the repository) ${formatSpread(spreadOf(ms.kiln!), 0)}, ` +
      `Kiln first start (empty KILN_HOME) ${formatSpread(spreadOf(ms['kiln-first']!), 0)}, ` +
      `Kiln (TypeScript sources) ${formatSpread(spreadOf(ms['kiln-source']!), 0)}, naive ${formatSpread(spreadOf(ms.naive!), 0)}`,
  );
  console.log(
    `  ${goalLine('Kiln installed ÷ naive', ratioSpread(ms.installed!, ms.naive!), { atMost: 1.3 })}`,
  );
  console.log(
    `  Kiln built in the repository ÷ naive: ${formatSpread(ratioSpread(ms.kiln!, ms.naive!), 2)}`,
  );
  console.log(
    `  ${goalLine('Kiln first start ÷ naive', ratioSpread(ms['kiln-first']!, ms.naive!), { atMost: 1.5 })}`,
  );

  /**
   * Memory of `kiln serve` with `workers` workers per process in `processes` processes, read
   * by `read(pid)` after 8 predictions once every process serves.
   */
  const memoryOf = async (
    workers: number,
    processes: number,
    read: (pid: number) => number,
  ): Promise<number> => {
    writeFileSync(
      join(model.dir, 'serving.properties'),
      `minWorkers=${workers}\nmaxWorkers=${workers}\n`,
    );
    const { child, url, metricsUrl } = startKiln(installed, model.dir, installedHome, {
      KILN_INGRESS_PROCESSES: String(processes),
    });
    try {
      await firstPrediction(url, body, performance.now(), child);
      if (processes > 1) await allProcessesReady(metricsUrl, processes);
      await Promise.all(Array.from({ length: 8 }, () => firstPrediction(url, body, 0, child)));
      return read(child.pid!);
    } finally {
      await stopChild(child);
    }
  };
  const rss = (workers: number) => memoryOf(workers, 1, rssMiB);
  const memory = await alternateRounds(
    [
      { name: 'one', measure: () => rss(1) },
      { name: 'four', measure: () => rss(4) },
    ],
    { rounds },
  );
  console.log(
    `RSS, MiB: 1 worker ${formatSpread(spreadOf(memory.one!), 0)}, 4 workers ${formatSpread(spreadOf(memory.four!), 0)}`,
  );
  console.log(
    `  ${goalLine('4 workers ÷ 1', ratioSpread(memory.four!, memory.one!), { atMost: 1.3 })}`,
  );

  const pssOf = (processes: number) => memoryOf(1, processes, pssTreeMiB);
  const tree = await alternateRounds(
    [
      { name: 'one', measure: () => pssOf(1) },
      { name: 'two', measure: () => pssOf(2) },
    ],
    { rounds },
  );
  console.log(
    `PSS of the process tree, MiB: 1 ingress process ${formatSpread(spreadOf(tree.one!), 0)}, ` +
      `2 ingress processes ${formatSpread(spreadOf(tree.two!), 0)}; ` +
      `2 ÷ 1 ${formatSpread(ratioSpread(tree.two!, tree.one!), 2)}`,
  );
  console.log(`end: ${machineLine()}`);
} finally {
  await rm(dir, { recursive: true, force: true });
}
