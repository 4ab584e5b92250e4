/**
 * What the worker pool costs each thread a request when many callers keep a one-thread pool
 * busy, in process: 64 concurrent callers of the `mlp` model (64 → 256 → 256 → 10) answering npy
 * bodies, each pass a process of its own (pool-cpu-pass.ts), CPU time read per thread from
 * /proc (Linux). With `--against DIR` (a built checkout of another revision: `npx tsc -b` in it)
 * passes of that build alternate with this tree's, so that a change to the pool's data path shows
 * as µs a request on the main thread and the host thread, from the same rounds.
 *
 *   node -C @kiln/source --import tsx bench/engine-overhead/pool-cpu.ts [--rounds 3] [--requests 60000] [--against /work/base]
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { mlpModel } from '@kiln/model-tools';
import { formatSpread, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const THIS_TREE = resolve(HERE, '../..');
const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    requests: { type: 'string', default: '60000' },
    against: { type: 'string' },
  },
});

interface PassResult {
  readonly requestsPerSecond: number;
  readonly mainUs: number;
  readonly hostUs: number;
  readonly otherUs: number;
}

/** One pass in a process of its own, with `tree`'s built worker pool. */
function pass(tree: string, modelDir: string): Promise<PassResult> {
  return new Promise((resolvePass, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(HERE, 'pool-cpu-pass.ts'), tree, modelDir, args.requests],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) =>
      code === 0
        ? resolvePass(JSON.parse(out.trim().split('\n').at(-1)!) as PassResult)
        : reject(new Error(`pass with ${tree} exited with ${code}`)),
    );
  });
}

const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-pool-cpu-'));
try {
  const mlp = await mlpModel(join(dir, 'mlp'), {
    inputSize: 64,
    hidden: [256, 256],
    outputSize: 10,
  });
  const trees = { this: THIS_TREE, ...(args.against ? { against: resolve(args.against) } : {}) };
  console.log(
    `pool-cpu: one-thread pool, 64 callers, ${args.requests} requests a pass; ${machineLine()}`,
  );
  const results: Record<string, PassResult[]> = { this: [], against: [] };
  await pass(THIS_TREE, mlp.dir); // warm-up: files cached, nothing measured
  for (let round = 0; round < Number(args.rounds); round++) {
    const order = Object.entries(trees);
    if (round % 2 === 1) order.reverse();
    for (const [name, tree] of order) results[name]!.push(await pass(tree, mlp.dir));
  }
  for (const [name, tree] of Object.entries(trees)) {
    const r = results[name]!;
    const f = (pick: (p: PassResult) => number, digits = 1) =>
      formatSpread(spreadOf(r.map(pick)), digits);
    console.log(
      `  ${name === 'this' ? 'this tree' : tree}: ${f((p) => p.requestsPerSecond, 0)} req/s; CPU µs a request: ` +
        `main thread ${f((p) => p.mainUs)}, host thread ${f((p) => p.hostUs)}, other threads ${f((p) => p.otherUs)}`,
    );
  }
  if (args.against) {
    const ratio = (pick: (p: PassResult) => number) =>
      formatSpread(ratioSpread(results.this!.map(pick), results.against!.map(pick)), 2);
    console.log(
      `  this ÷ against, same rounds: req/s ${ratio((p) => p.requestsPerSecond)}, main thread µs ${ratio((p) => p.mainUs)}, host thread µs ${ratio((p) => p.hostUs)}`,
    );
  }
  console.log(`end: ${machineLine()}`);
} finally {
  await rm(dir, { recursive: true, force: true });
}
