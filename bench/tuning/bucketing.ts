/**
 * Sequence padding and bucketing as served models get them from serving.properties, over
 * HTTP: the same encoder registered three times in one server — `stack` (the default: only
 * equal lengths share a forward, so a variable-length workload runs one request a forward),
 * `batchifier=pad` and `batchifier=bucket` — loaded with the same variable-length requests.
 * Contenders alternate over the rounds; prints req/s per contender, the ratios from the same
 * rounds, forwards per request, and the load average.
 *
 *   node -C @kiln/source --import tsx bench/tuning/bucketing.ts [--requests 96] [--rounds 3] …
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NDList, Tensor, decodeNpy, encodeNpz } from '@kiln/core';
import { MODEL_FILE, SeededRandom, transformerEncoderModel } from '@kiln/model-tools';
import type { BatchMetrics } from '@kiln/worker-pool';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { startBenchServer } from './bench-server.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '96' },
    concurrency: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '3' },
    batch: { type: 'string', default: '8' },
    delay: { type: 'string', default: '10' },
    workers: { type: 'string', default: '2' },
    layers: { type: 'string', default: '2' },
    hidden: { type: 'string', default: '128' },
    heads: { type: 'string', default: '4' },
    'min-len': { type: 'string', default: '8' },
    'max-len': { type: 'string', default: '256' },
    buckets: { type: 'string', default: '32,64,128,256' },
    seed: { type: 'string', default: '7' },
  },
});
const int = (name: keyof typeof args) => {
  const value = Number(args[name]);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be an integer ≥ 1`);
  return value;
};

const VOCAB = 30522;
const GOAL = { atLeast: 1.5 };

/** One request: an .npz of `input_ids` and `attention_mask`, [1, n] int64, and its n. */
interface SequenceRequest {
  readonly length: number;
  readonly body: Buffer;
}

function requests(count: number, seed: number, minLen: number, maxLen: number): SequenceRequest[] {
  const random = new SeededRandom(seed);
  return Array.from({ length: count }, () => {
    const length = minLen + random.int(maxLen - minLen + 1);
    // Ids 1.. so that 0 stays the pad token.
    const ids = BigInt64Array.from({ length }, () => BigInt(1 + random.int(VOCAB - 1)));
    const body = encodeNpz(
      NDList.of(
        new Tensor('int64', ids, [1, length], 'input_ids'),
        new Tensor('int64', new BigInt64Array(length).fill(1n), [1, length], 'attention_mask'),
      ),
    );
    return { length, body: Buffer.from(body) };
  });
}

/** POSTs one request; resolves with the answer's last_hidden_state values, checked for shape. */
function predict(
  agent: http.Agent,
  url: URL,
  request: SequenceRequest,
  hidden: number,
): Promise<Float32Array> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        headers: { 'content-length': request.body.byteLength, accept: 'tensor/npy' },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (c: Buffer) => chunks.push(c));
        response.on('end', () => {
          const body = Buffer.concat(chunks);
          if (response.statusCode !== 200)
            return reject(new Error(`${response.statusCode}: ${body.toString()}`));
          const tensor = decodeNpy(new Uint8Array(body));
          const expected = [1, request.length, hidden];
          if (tensor.shape.join() !== expected.join())
            return reject(new Error(`answer shape [${tensor.shape}], expected [${expected}]`));
          resolve(tensor.data as Float32Array);
        });
      },
    );
    req.on('error', reject);
    req.end(request.body);
  });
}

/** Every request once through `concurrency` closed-loop clients; req/s and the answers. */
async function serveAll(
  url: URL,
  all: readonly SequenceRequest[],
  concurrency: number,
  hidden: number,
): Promise<{ throughput: number; answers: Float32Array[] }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const answers = new Array<Float32Array>(all.length);
  let next = 0;
  const started = performance.now();
  const client = async () => {
    while (next < all.length) {
      const i = next++;
      answers[i] = await predict(agent, url, all[i]!, hidden);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { throughput: all.length / seconds, answers };
}

function largestDifference(a: readonly Float32Array[], b: readonly Float32Array[]): number {
  let largest = 0;
  a.forEach((x, i) => {
    const y = b[i]!;
    if (x.length !== y.length) largest = Infinity;
    else for (let j = 0; j < x.length; j++) largest = Math.max(largest, Math.abs(x[j]! - y[j]!));
  });
  return largest;
}

async function main(): Promise<void> {
  const shape = {
    layers: int('layers'),
    hidden: int('hidden'),
    heads: int('heads'),
    maxLen: int('max-len'),
  };
  const cache = join(tmpdir(), 'kiln-bench-tuning', `encoder-${Object.values(shape).join('x')}`);
  if (!existsSync(join(cache, MODEL_FILE))) await transformerEncoderModel(cache, shape);

  const pool = [
    `batch_size=${int('batch')}`,
    `max_batch_delay=${int('delay')}`,
    `minWorkers=${int('workers')}`,
    `maxWorkers=${int('workers')}`,
  ];
  const contenders = {
    stack: [],
    pad: ['batchifier=pad'],
    bucket: ['batchifier=bucket', `bucket_boundaries=${args.buckets}`, 'bucket_by=input_ids'],
  } as const;
  const store = mkdtempSync(join(tmpdir(), 'kiln-bucketing-'));
  for (const [name, lines] of Object.entries(contenders)) {
    mkdirSync(join(store, name));
    copyFileSync(join(cache, MODEL_FILE), join(store, name, MODEL_FILE));
    writeFileSync(join(store, name, 'serving.properties'), [...pool, ...lines, ''].join('\n'));
  }
  const server = await startBenchServer(
    Object.keys(contenders).map((name) => `${name}=${join(store, name)}`),
  );
  try {
    for (let i = 0; i < 600 && server.models.list().some((e) => e.state === 'PENDING'); i++)
      await new Promise((r) => setTimeout(r, 100));
    const batches: Record<string, BatchMetrics[]> = {};
    for (const entry of server.models.list()) {
      if (entry.state !== 'READY') throw new Error(`model ${entry.name}: ${entry.error}`);
      const seen: BatchMetrics[] = (batches[entry.name] = []);
      entry.pool!.on('batch', (b) => seen.push(b));
    }

    const workload = requests(int('requests'), int('seed'), int('min-len'), shape.maxLen);
    const concurrency = int('concurrency');
    const urlOf = (name: string) => new URL(`${server.urls.inference}/predictions/${name}`);
    console.log(machineLine());
    console.log(
      `encoder ${JSON.stringify(shape)}; ${workload.length} requests a round, lengths ` +
        `${args['min-len']}–${shape.maxLen} (seed ${args.seed}), ${concurrency} closed-loop HTTP clients; ` +
        `${pool.join(', ')}; buckets ${args.buckets}; ${args.rounds} rounds alternating`,
    );

    // Warm-up: one pass each, whose answers must agree (the encoder masks padding).
    const warm: Record<string, Float32Array[]> = {};
    for (const name of Object.keys(contenders))
      warm[name] = (await serveAll(urlOf(name), workload, concurrency, shape.hidden)).answers;
    for (const name of Object.keys(batches)) batches[name]!.length = 0;

    const figures = await alternateRounds(
      Object.keys(contenders).map((name) => ({
        name,
        measure: async () =>
          (await serveAll(urlOf(name), workload, concurrency, shape.hidden)).throughput,
      })),
      { rounds: int('rounds') },
    );

    for (const name of Object.keys(contenders)) {
      const seen = batches[name]!;
      const jobs = seen.reduce((n, b) => n + b.batchSize, 0);
      const forwards = seen.reduce((n, b) => n + b.forwards, 0);
      console.log(
        `${name.padEnd(6)} ${formatSpread(spreadOf(figures[name]!))} req/s; ` +
          `${(jobs / seen.length).toFixed(2)} requests a run, ${(jobs / forwards).toFixed(2)} a forward`,
      );
    }
    console.log(goalLine('pad ÷ stack', ratioSpread(figures.pad!, figures.stack!), GOAL));
    console.log(goalLine('bucket ÷ stack', ratioSpread(figures.bucket!, figures.stack!), GOAL));
    console.log(
      `bucket ÷ pad: ${formatSpread(ratioSpread(figures.bucket!, figures.pad!), 2)}× (reference, no goal)`,
    );
    console.log(
      `largest |difference| of an answer, pad vs stack: ${largestDifference(warm.pad!, warm.stack!).toExponential(2)}, ` +
        `bucket vs stack: ${largestDifference(warm.bucket!, warm.stack!).toExponential(2)}`,
    );
    console.log(machineLine());
  } finally {
    await server.stop();
    rmSync(store, { recursive: true, force: true });
  }
}

await main();
