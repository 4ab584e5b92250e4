/**
 * Dynamic batching in Python mode: the same small numpy MLP (64 → hidden → hidden → 10,
 * float32, one BLAS thread) served by `kiln serve` as installed (built JS, the bin's Node flags,
 * one server process each, one Python worker) with batch_size=8 (max_batch_delay 5 ms; the
 * handler stacks get_batches() into one matmul) and with batch_size=1 (one handler call per
 * request). Same wrk load (npy body, 384 B) on both; rounds alternate; the gain is batched ÷
 * unbatched throughput within each round.
 *
 *   node -C @kiln/source --import tsx bench/python-mode/batching.ts [--seconds 5] [--rounds 3] [--concurrency 32] [--hidden 256]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Tensor, encodeNpy } from '@kiln/core';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { runLoad } from '../server/load-generator.js';
import { runWrk, wrkAvailable } from '../server/wrk-load.js';
import { buildKilnCli, startKilnServe } from '../server/contenders.js';
import { MLP_HANDLER } from './mlp-handler.js';
import { perCallSplit } from './per-call-split.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '32' },
    hidden: { type: 'string', default: '256' },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const concurrency = Number(args.concurrency);
const hidden = Number(args.hidden);
const PYTHON = '/usr/bin/python3';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-python-batching-'));
const models = { batched: 'batch_size=8\nmax_batch_delay=5\n', single: 'batch_size=1\n' };
buildKilnCli();
let port = 18_500 + Math.floor(Math.random() * 1000);
const servers = Object.fromEntries(
  await Promise.all(
    Object.entries(models).map(async ([name, properties]) => {
      const dir = path.join(root, name);
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, 'model.py'), MLP_HANDLER(hidden));
      fs.writeFileSync(
        path.join(dir, 'serving.properties'),
        `engine=Python\noption.pythonExecutable=${PYTHON}\nminWorkers=1\nmaxWorkers=1\n${properties}`,
      );
      const at = (port += 3);
      // One BLAS thread per worker, as a server with one worker per core would run.
      const server = await startKilnServe(name, dir, at, [], {
        OPENBLAS_NUM_THREADS: '1',
        OMP_NUM_THREADS: '1',
      });
      return [name, { ...server, metrics: `http://127.0.0.1:${at + 2}` }] as const;
    }),
  ),
);

const body = Buffer.from(
  encodeNpy(new Tensor('float32', new Float32Array(64).fill(0.25), [1, 64])),
);
const errors: Record<string, number> = { batched: 0, single: 0 };
const throughputOf = async (model: string) => {
  const options = {
    url: `${servers[model]!.url}/predictions/${model}`,
    body,
    headers: { 'content-type': 'tensor/npy' },
    concurrency,
    durationMs: seconds * 1000,
  };
  const result = wrkAvailable() ? await runWrk(options) : await runLoad(options);
  errors[model]! += result.errors;
  return result.throughput;
};

console.log(machineLine());
console.log(
  `client: ${wrkAvailable() ? 'wrk (one thread)' : 'Node http'}, concurrency ${concurrency}; ${seconds} s per round, ${rounds} rounds + 1 warm-up`,
);
try {
  const figures = await alternateRounds(
    [
      { name: 'batched', measure: () => throughputOf('batched') },
      { name: 'single', measure: () => throughputOf('single') },
    ],
    { rounds, warmupRounds: 1 },
  );
  const metrics = await (await fetch(`${servers.batched!.metrics}/metrics`)).text();
  const meanBatch =
    Number(/kiln_batch_size_sum\{model="batched"\} ([\d.e+]+)/.exec(metrics)?.[1]) /
    Number(/kiln_batch_size_count\{model="batched"\} (\d+)/.exec(metrics)?.[1]);
  for (const model of Object.keys(models))
    console.log(await perCallSplit(servers[model]!.metrics, model));
  console.log(
    `batch_size=8: ${formatSpread(spreadOf(figures.batched!))} req/s (mean batch ${meanBatch.toFixed(1)}); batch_size=1: ${formatSpread(spreadOf(figures.single!))} req/s; errors ${errors.batched} / ${errors.single}`,
  );
  console.log(
    goalLine('dynamic batching gain', ratioSpread(figures.batched!, figures.single!), {
      atLeast: 3,
    }),
  );
  console.log(machineLine());
} finally {
  await Promise.all(Object.values(servers).map((server) => server.stop()));
  fs.rmSync(root, { recursive: true, force: true });
}
