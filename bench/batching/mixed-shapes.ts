/**
 * Requests of a few interleaved shapes through one pool: the queue keying each request by the
 * layout it declares (servingBatchKeyOf, the default), so that a batch is one forward, against
 * the same pool with every request in one bucket (what the queue did before), whose mixed
 * batches the worker's Predictor parts into one forward per shape. Same model, settings and
 * requests; contenders alternate over the rounds.
 *
 *   node -C @kiln/source --import tsx bench/batching/mixed-shapes.ts [--requests 3000] [--concurrency 16] [--lengths 24,32,40] [--batch 8] [--rounds 3]
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NDList, type ServingInput, Tensor } from '@kiln/core';
import { GraphBuilder, MODEL_FILE, writeModelFolder } from '@kiln/model-tools';
import { seededRandom } from '@kiln/testing';
import { type BatchMetrics, createWorkerPool } from '@kiln/worker-pool';
import {
  formatSpread,
  goalLine,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';
import { runLoad } from './load-test.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '16' },
    lengths: { type: 'string', default: '24,32,40' },
    batch: { type: 'string', default: '8' },
    delay: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    width: { type: 'string', default: '64' },
    hidden: { type: 'string', default: '256' },
  },
});
const int = (name: keyof typeof args) => {
  const value = Number(args[name]);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be an integer ≥ 1`);
  return value;
};

/** x [batch, seq, width] → two dense layers per position → y [batch, seq, width]. */
async function positionwiseModel(dir: string, width: number, hidden: number): Promise<void> {
  const random = seededRandom(5);
  const weights = (n: number) => Float32Array.from({ length: n }, () => random() - 0.5);
  const g = new GraphBuilder('positionwise');
  g.input('x', 'float32', ['batch', 'seq', width]);
  const h = g.op('Relu', [
    g.op('MatMul', ['x', g.weight('w1', [width, hidden], weights(width * hidden))]),
  ]);
  g.op(
    'MatMul',
    [h, g.weight('w2', [hidden, width], weights(hidden * width))],
    {},
    { output: 'y' },
  );
  g.output('y', 'float32', ['batch', 'seq', width]);
  await mkdir(dir, { recursive: true });
  await writeModelFolder(dir, g.toModel());
}

async function main(): Promise<void> {
  const width = int('width');
  const hidden = int('hidden');
  const lengths = args.lengths.split(',').map(Number);
  const dir = join(tmpdir(), 'kiln-bench-batching', `positionwise-${width}-${hidden}`);
  if (!existsSync(join(dir, MODEL_FILE))) await positionwiseModel(dir, width, hidden);
  const random = seededRandom(11);
  // Shapes interleaved as clients of different lengths send them.
  const requests: ServingInput[] = Array.from({ length: int('requests') }, () => {
    const seq = lengths[Math.floor(random() * lengths.length)]!;
    const data = Float32Array.from({ length: seq * width }, () => random());
    return { tensors: NDList.of(new Tensor('float32', data, [1, seq, width], 'x')) };
  });
  const settings = {
    batchSize: int('batch'),
    maxBatchDelayMs: Number(args.delay),
    minWorkers: 1,
    maxWorkers: 1,
    placement: 'thread' as const,
    jobQueueSize: 1000,
  };
  const contenders = {
    keyed: await createWorkerPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings,
    }),
    'one bucket': await createWorkerPool({
      model: { url: dir, engines: ['@kiln/engine-onnxruntime'] },
      settings,
      bucketOf: () => undefined,
    }),
  };
  type Name = keyof typeof contenders;
  const names = Object.keys(contenders) as Name[];
  const forwards = new Map<Name, { batches: number; forwards: number }>();
  for (const name of names) {
    const counts = { batches: 0, forwards: 0 };
    forwards.set(name, counts);
    contenders[name].on('batch', (batch: BatchMetrics) => {
      counts.batches++;
      counts.forwards += batch.forwards;
    });
  }
  const concurrency = int('concurrency');
  console.log(machineLine());
  console.log(
    `model: x [batch, seq, ${width}] → MatMul ${width}×${hidden} → Relu → MatMul ${hidden}×${width} (ONNX Runtime, 1 worker on a thread); ` +
      `seq drawn from ${lengths.join(', ')}; ${requests.length} requests, concurrency ${concurrency}, batch_size ${settings.batchSize}, max_batch_delay ${settings.maxBatchDelayMs} ms; ${args.rounds} rounds, alternating`,
  );
  const throughput: Record<Name, number[]> = { keyed: [], 'one bucket': [] };
  try {
    for (const name of names) await runLoad(contenders[name], requests.slice(0, 300), concurrency);
    for (const counts of forwards.values()) Object.assign(counts, { batches: 0, forwards: 0 });
    for (let round = 0; round < int('rounds'); round++) {
      for (const name of orderOf(names, round))
        throughput[name].push((await runLoad(contenders[name], requests, concurrency)).throughput);
      console.log(
        `  round ${round + 1}: ${names.map((n) => `${n} ${throughput[n].at(-1)!.toFixed(0)}`).join(', ')} req/s; load ${loadAverage()}`,
      );
    }
  } finally {
    await Promise.all(names.map((name) => contenders[name].shutdown()));
  }
  for (const name of names) {
    const { batches, forwards: runs } = forwards.get(name)!;
    console.log(
      `${name}: ${formatSpread(spreadOf(throughput[name]), 0)} req/s; ${((requests.length * int('rounds')) / batches).toFixed(2)} requests a batch, ${(runs / batches).toFixed(2)} forwards a batch`,
    );
  }
  console.log(
    goalLine(
      'keyed ÷ one bucket, same rounds',
      ratioSpread(throughput.keyed, throughput['one bucket']),
      {
        atLeast: 1,
      },
    ),
  );
  console.log(`end: ${machineLine()}`);
}

await main();
