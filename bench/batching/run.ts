/**
 * Dynamic batching through the worker pool: the same requests at the same concurrency, served
 * with batch_size 1 and batch_size 8; prints throughput, latency, the event loop's lag and
 * the throughput ratio.
 *
 *   node -C @kiln/source --import tsx bench/batching/run.ts [--requests 4000] [--concurrency 32] [--batch 8] [--nice 5] [--placement thread] …
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { MODEL_FILE, mlpModel } from '@kiln/model-tools';
import { createWorkerPool, parsePlacement } from '@kiln/worker-pool';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { type LoadResult, runLoad } from './load-test.js';
import { largestDifference, rowRequests } from './workload.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '32' },
    batch: { type: 'string', default: '8' },
    delay: { type: 'string', default: '5' },
    workers: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    input: { type: 'string', default: '784' },
    hidden: { type: 'string', default: '512,256' },
    seed: { type: 'string', default: '11' },
    nice: { type: 'string', default: '5' },
    // The server's default. The pool's own default, auto, runs a model this small inline.
    placement: { type: 'string', default: 'thread' },
  },
});
const int = (name: keyof typeof args) => {
  const value = Number(args[name]);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be an integer ≥ 1`);
  return value;
};

async function main(): Promise<void> {
  const inputSize = int('input');
  const hidden = args.hidden.split(',').map(Number);
  const dir = join(tmpdir(), 'kiln-bench-batching', `mlp-${inputSize}-${hidden.join('-')}`);
  if (!existsSync(join(dir, MODEL_FILE)))
    await mlpModel(dir, { inputSize, hidden, outputSize: 10 });
  const requests = rowRequests(int('requests'), inputSize, int('seed'));
  const workers = int('workers');
  const concurrency = int('concurrency');
  const configurations = [1, int('batch')].map((batchSize) => ({
    name: `batch_size ${batchSize}`,
    settings: {
      batchSize,
      maxBatchDelayMs: batchSize === 1 ? 0 : int('delay'),
      minWorkers: workers,
      maxWorkers: workers,
      jobQueueSize: Math.max(1000, 2 * concurrency),
      workerNice: Number(args.nice),
      placement: parsePlacement(args.placement),
    },
  }));

  console.log(
    `model: MLP ${[inputSize, ...hidden, 10].join('-')} (ONNX Runtime, ${workers} workers, placement ${args.placement}, workerNice ${args.nice}); ` +
      `${requests.length} requests, concurrency ${concurrency}, ${args.rounds} rounds`,
  );
  const pools = await Promise.all(
    configurations.map((c) =>
      createWorkerPool({
        model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
        settings: c.settings,
      }),
    ),
  );
  for (const [i, pool] of pools.entries()) {
    const { kind, reason } = pool.describe().placement;
    console.log(
      `${configurations[i]!.name}: workers run ${kind === 'inline' ? 'on the calling thread' : 'on threads'} (${reason})`,
    );
  }
  const results = new Map<string, LoadResult[]>(configurations.map((c) => [c.name, []]));
  const idleLag: number[] = [];
  try {
    for (const pool of pools)
      await runLoad(pool, requests.slice(0, Math.min(500, requests.length)), concurrency);
    // Rounds alternate the configurations, so a burst of load from elsewhere hits both alike.
    for (let round = 0; round < int('rounds'); round++) {
      idleLag.push(await idleLagP99(1000));
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const i of order)
        results.get(configurations[i]!.name)!.push(await runLoad(pools[i]!, requests, concurrency));
    }
  } finally {
    await Promise.all(pools.map((pool) => pool.shutdown()));
  }

  const median = (rounds: LoadResult[]) =>
    [...rounds].sort((a, b) => a.throughput - b.throughput)[Math.floor(rounds.length / 2)]!;
  const rows = configurations.map((c) => ({ name: c.name, result: median(results.get(c.name)!) }));
  const header = [
    'configuration',
    'req/s',
    'p50 ms',
    'p99 ms',
    'loop lag p99 ms',
    'lag max ms',
    'main thread busy',
    'main CPU µs/req',
    'main run-queue wait ms/s',
    'mean batch',
  ];
  console.log(header.join(' | '));
  for (const { name, result } of rows) {
    console.log(
      [
        name,
        result.throughput.toFixed(0),
        result.p50Ms.toFixed(2),
        result.p99Ms.toFixed(2),
        result.lagP99Ms.toFixed(2),
        result.lagMaxMs.toFixed(2),
        `${(100 * result.mainThreadBusy).toFixed(0)}%`,
        result.mainCpuUsPerRequest?.toFixed(0) ?? 'n/a',
        result.mainRunQueueMsPerS?.toFixed(0) ?? 'n/a',
        result.meanBatch.toFixed(2),
      ].join(' | '),
    );
  }
  const [single, batched] = rows;
  const throughputs = (name: string) => results.get(name)!.map((r) => r.throughput);
  const [singleName, batchedName] = configurations.map((c) => c.name) as [string, string];
  console.log(
    `throughput, median [min–max] over rounds: ${singleName} ${formatSpread(spreadOf(throughputs(singleName)), 0)} req/s, ` +
      `${batchedName} ${formatSpread(spreadOf(throughputs(batchedName)), 0)} req/s`,
  );
  console.log(
    goalLine(
      `throughput ratio ${batchedName} ÷ batch_size 1`,
      ratioSpread(throughputs(batchedName), throughputs(singleName)),
      { atLeast: 4 },
    ),
  );
  console.log(
    goalLine(
      'event loop lag p99 while saturated',
      spreadOf(results.get(batchedName)!.map((r) => r.lagP99Ms)),
      { atMost: 5 },
      ' ms',
    ) + `; idle baseline in the same run: ${formatSpread(spreadOf(idleLag), 2)} ms`,
  );
  console.log(`load: ${machineLine()}`);
  console.log(
    `largest difference between the two configurations' answers: ${largestDifference(single!.result.outputs, batched!.result.outputs).toExponential(2)}`,
  );
}

/** The event loop's p99 delay over `ms` with nothing to do: what the host alone costs. */
async function idleLagP99(ms: number): Promise<number> {
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  await new Promise((resolve) => setTimeout(resolve, ms));
  lag.disable();
  return lag.percentile(99) / 1e6;
}

await main();
