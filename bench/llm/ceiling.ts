// The most any server could reach on the LLM bench's workload on this machine, with this model
// file and ONNX Runtime: each run's cost measured from a bare ONNX Runtime session (no Kiln code),
// then vs-transformers-js.ts's workload simulated over those costs with nothing spent between
// runs (ceiling-model.ts). It prints one request at a time (what a server around
// transformers.js's pipeline does at best) against rolling batching at the bench's concurrency,
// with each decode step padded to its longest past (what the export's dense attention computes),
// split into the two runs that cost least, or ragged (each row charged its own past): the
// ceiling of the bench's `kiln ÷ transformers.js tokens/s` row for each. Every cost is timed
// twice: fetching the presents (as any server runs the export) and, on the export with its new
// positions as outputs (withNewKvOutputs, what Kiln serves), fetching logits and those alone.
// See bench/README.md.
//
//   node -C @kiln/source --import tsx bench/llm/ceiling.ts [--rounds 3] [--threads 2]
//        [--transformers-js-tokens-per-s 82.6]   (a measured one-at-a-time rate to compare with)
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LLAMA_MODEL_FILE } from '@kiln/model-tools';
import { loadOrt, newKvOutputName, withNewKvOutputs } from '@kiln/engine-onnxruntime';
import { createGenerationPool } from '@kiln/worker-pool';
import type { Tensor as OrtTensor } from 'onnxruntime-node';
import { formatSpread, loadAverage, machineLine, median, spreadOf } from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';
import { type CeilingRequest, interpolatedCosts, oneAtATime, rolling } from './ceiling-model.js';
import { LLM_MODEL_OPTIONS, llmModelFrom } from './llm-model.js';
import { LLM_WORKLOAD_OPTIONS, llmWorkload } from './llm-workload.js';

const { values } = parseArgs({
  options: {
    ...LLM_WORKLOAD_OPTIONS,
    rounds: { type: 'string', default: '3' },
    /** Timed runs per point and round, after two untimed ones. */
    runs: { type: 'string', default: '5' },
    rows: { type: 'string', default: '1,2,4,8,16' },
    pasts: { type: 'string', default: '16,128,256,384' },
    prompts: { type: 'string', default: '8,36,64' },
    'transformers-js-tokens-per-s': { type: 'string' },
    /** Skip Kiln's own run of the workload (in this process) in each round. */
    'no-kiln': { type: 'boolean', default: false },
    ...LLM_MODEL_OPTIONS,
  },
});
const list = (text: string) => text.split(',').map(Number);
const rows = list(values.rows);
const pasts = list(values.pasts);
const prompts = list(values.prompts);
const concurrency = Number(values.concurrency);

console.log(`llm ceiling: ${machineLine()}`);
const model = await llmModelFrom(values, (line) => console.log(`  ${line}`));
const config = JSON.parse(await readFile(join(model.dir, 'config.json'), 'utf8')) as {
  num_attention_heads: number;
  num_key_value_heads?: number;
  hidden_size: number;
  head_dim?: number;
  vocab_size: number;
};
const kvHeads = config.num_key_value_heads ?? config.num_attention_heads;
const headDim = config.head_dim ?? config.hidden_size / config.num_attention_heads;
const file = join(model.dir, LLAMA_MODEL_FILE);
if (!existsSync(file)) throw new Error(`${file} does not exist`);
console.log(`model: ${model.description}; ${model.dir}`);

const ort = await loadOrt();
// As Kiln's sessions run: intra-op threads as given, no spinning, sequential, all optimizations.
const sessionOptions = {
  intraOpNumThreads: Number(values.threads),
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
  extra: { session: { intra_op: { allow_spinning: '0' } } },
} as const;
const session = await ort.InferenceSession.create(file, sessionOptions);
const tapped = withNewKvOutputs(await readFile(file));
if (!tapped)
  throw new Error(`${file}: its presents are not a Concat of the past and new positions`);
const tappedSession = await ort.InferenceSession.create(Buffer.concat(tapped), sessionOptions);
const newPositions = [
  'logits',
  ...session.inputNames
    .filter((name) => name.startsWith('past_key_values.'))
    .map((name) => {
      const [, layer, kind] = name.split('.');
      return newKvOutputName(Number(layer), kind as 'key' | 'value');
    }),
];
/** How a run is fetched: its presents whole, or (the tapped export) its new positions alone. */
const FETCHES = {
  presents: (input: Record<string, OrtTensor>) => session.run(input),
  'new positions': (input: Record<string, OrtTensor>) => tappedSession.run(input, newPositions),
};
type Fetch = keyof typeof FETCHES;

/** Feeds for `batch` rows of `tokens` new tokens each after `past` positions (zeros: costs only). */
function feeds(batch: number, tokens: number, past: number): Record<string, OrtTensor> {
  const int64 = (values: bigint[], dims: number[]) => new ort.Tensor('int64', values, dims);
  const out: Record<string, OrtTensor> = {};
  for (const name of session.inputNames) {
    if (name === 'input_ids')
      out[name] = int64(
        Array.from({ length: batch * tokens }, () => 5n),
        [batch, tokens],
      );
    else if (name === 'attention_mask')
      out[name] = int64(
        Array.from({ length: batch * (past + tokens) }, () => 1n),
        [batch, past + tokens],
      );
    else if (name === 'position_ids')
      out[name] = int64(
        Array.from({ length: batch * tokens }, (_, i) => BigInt(past + (i % tokens))),
        [batch, tokens],
      );
    else if (name.startsWith('past_key_values.'))
      out[name] = new ort.Tensor(
        'float32',
        new Float32Array(batch * kvHeads * past * headDim).fill(0.01),
        [batch, kvHeads, past, headDim],
      );
    else if (name === 'use_cache_branch') out[name] = new ort.Tensor('bool', [past > 0], [1]);
    else if (name === 'num_logits_to_keep') out[name] = int64([1n], []);
    else throw new Error(`${file}: input ${name} is not one this bench can feed`);
  }
  return out;
}

async function timeRuns(input: Record<string, OrtTensor>, fetch: Fetch): Promise<number> {
  const run = FETCHES[fetch];
  for (let i = 0; i < 2; i++) await run(input);
  const times: number[] = [];
  for (let i = 0; i < Number(values.runs); i++) {
    const start = performance.now();
    await run(input);
    times.push(performance.now() - start);
  }
  return median(times);
}

// The workload vs-transformers-js.ts sends (token ids do not change what a run costs).
const workload = llmWorkload(values, config.vocab_size);
const requests: CeilingRequest[] = workload.requests.map((job, i) => ({
  arrivalMs: workload.arrivalsMs[i]!,
  promptTokens: job.promptTokens.length,
  newTokens: job.maxNewTokens,
}));
console.log(
  `workload (as vs-transformers-js.ts): ${requests.length} requests, ${requests.reduce((n, r) => n + r.newTokens, 0)} tokens, at most ${concurrency} in flight`,
);

// Kiln's own rolling batching on the same workload, in this process (no HTTP, no client
// process), in the same rounds as the costs: how close its steps come to the ceilings.
const kiln = values['no-kiln']
  ? undefined
  : await createGenerationPool({
      model: {
        url: model.dir,
        engines: ['@kiln/engine-onnxruntime'],
        overrides: {
          'option.rolling_batch': 'auto',
          'option.max_rolling_batch_size': String(concurrency),
          'option.intraOpNumThreads': values.threads,
        },
      },
      settings: { minWorkers: 1, maxWorkers: 1 },
    });
const stepTotals = { steps: 0, rows: 0, ms: 0 };
kiln?.onStep((step) => {
  stepTotals.steps++;
  stepTotals.rows += step.sequences;
  stepTotals.ms += step.hostMs;
});
const jobs = workload.requests.map((job) => ({ ...job, ignoreEos: true }));
await Promise.all(jobs.slice(0, 4).map((job) => kiln?.predict({ ...job, maxNewTokens: 4 })));

type Point = (
  { kind: 'decode'; rows: number; past: number } | { kind: 'prefill'; tokens: number }
) & { fetch: Fetch };
const points: Point[] = (Object.keys(FETCHES) as Fetch[]).flatMap((fetch) => [
  ...rows.flatMap((n) => pasts.map((past) => ({ kind: 'decode' as const, rows: n, past, fetch }))),
  ...prompts.map((tokens) => ({ kind: 'prefill' as const, tokens, fetch })),
]);
const SHAPES = ['padded', 'split', 'ragged'] as const;
const perRound: {
  single: number;
  ceilings: Record<(typeof SHAPES)[number], number>;
  /** The same, on the costs of runs that fetch only logits and new positions. */
  tapped: { single: number; ceilings: Record<(typeof SHAPES)[number], number> };
  kiln?: number;
  costs: Map<Point, number>;
}[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  // Every point once a round, the points' order turning each round.
  const costsOf = new Map<Point, number>();
  for (const point of orderOf(points, round)) {
    const input =
      point.kind === 'decode' ? feeds(point.rows, 1, point.past) : feeds(1, point.tokens, 0);
    costsOf.set(point, await timeRuns(input, point.fetch));
  }
  const ceilingsOf = (fetch: Fetch) => {
    const at = (find: (p: Point) => boolean) =>
      costsOf.get(points.find((p) => p.fetch === fetch && find(p))!)!;
    const costs = interpolatedCosts({
      rows,
      pasts,
      decodeMs: rows.map((n) =>
        pasts.map((past) => at((p) => p.kind === 'decode' && p.rows === n && p.past === past)),
      ),
      prompts,
      prefillMs: prompts.map((tokens) => at((p) => p.kind === 'prefill' && p.tokens === tokens)),
    });
    return {
      single: oneAtATime(requests, costs).tokensPerS,
      ceilings: Object.fromEntries(
        SHAPES.map((shape) => [shape, rolling(requests, costs, concurrency, shape).tokensPerS]),
      ) as Record<(typeof SHAPES)[number], number>,
    };
  };
  const { single, ceilings } = ceilingsOf('presents');
  const tapped = ceilingsOf('new positions');
  let line = `round ${round + 1}: one at a time ${single.toFixed(1)}, rolling c${concurrency} ${SHAPES.map((s) => `${s} ${ceilings[s].toFixed(1)}`).join(', ')} tokens/s at no cost between runs (new positions only: ${tapped.single.toFixed(1)}, padded ${tapped.ceilings.padded.toFixed(1)})`;
  let kilnTokensPerS: number | undefined;
  if (kiln) {
    Object.assign(stepTotals, { steps: 0, rows: 0, ms: 0 });
    const started = performance.now();
    let tokens = 0;
    await closedLoop(workload.arrivalsMs, concurrency, async (i) => {
      const answer = await kiln.predict(jobs[i]!);
      tokens += answer.tokens.length;
    });
    kilnTokensPerS = (tokens * 1000) / (performance.now() - started);
    const { steps, rows: stepped, ms } = stepTotals;
    line += `; kiln in process ${kilnTokensPerS.toFixed(1)} (${steps} steps of ${(ms / steps).toFixed(1)} ms on its step worker, ${(stepped / steps).toFixed(1)} sequences a step)`;
  }
  console.log(`${line}; load ${loadAverage()}`);
  perRound.push({
    single,
    ceilings,
    tapped,
    costs: costsOf,
    ...(kilnTokensPerS ? { kiln: kilnTokensPerS } : {}),
  });
}
await session.release();
await tappedSession.release();
await kiln?.shutdown();

const rounds = perRound.length;
const medianCost = (point: Point) => median(perRound.map((r) => r.costs.get(point)!));
for (const fetch of Object.keys(FETCHES) as Fetch[]) {
  const find = (f: (p: Point) => boolean) => points.find((p) => p.fetch === fetch && f(p))!;
  console.log(
    `\ndecode run fetching ${fetch}, ms (median over ${rounds} rounds of the median of ${values.runs} runs; per token in brackets):`,
  );
  console.log(`  rows \\ past ${pasts.map((p) => String(p).padStart(16)).join('')}`);
  for (const n of rows) {
    const cells = pasts.map((past) => {
      const t = medianCost(find((p) => p.kind === 'decode' && p.rows === n && p.past === past));
      return `${t.toFixed(1)} (${(t / n).toFixed(2)})`.padStart(16);
    });
    console.log(`  ${String(n).padStart(11)} ${cells.join('')}`);
  }
  console.log(
    `prefill of one prompt, ms: ${prompts.map((tokens) => `${tokens} tokens ${medianCost(find((p) => p.kind === 'prefill' && p.tokens === tokens)).toFixed(1)}`).join(', ')}`,
  );
}
const spread = (xs: number[], digits = 2) => formatSpread(spreadOf(xs), digits);
console.log(`\nmedian [min–max] over ${rounds} rounds, tokens/s at no cost between runs:`);
console.log(
  `  one at a time (a one-generation-at-a-time server's best): ${spread(
    perRound.map((r) => r.single),
    1,
  )}`,
);
const measured = values['transformers-js-tokens-per-s'];
for (const shape of SHAPES) {
  const against = measured
    ? `; ÷ transformers.js as measured (${measured}) ${spread(perRound.map((r) => r.ceilings[shape] / Number(measured)))}×`
    : '';
  console.log(
    `  rolling c${concurrency}, ${shape.padEnd(7)} ${spread(
      perRound.map((r) => r.ceilings[shape]),
      1,
    )}: ÷ one at a time ${spread(perRound.map((r) => r.ceilings[shape] / r.single))}×${against} (the bench's row: ≥ 3×)`,
  );
}
if (kiln) {
  const ofKiln = (f: (r: (typeof perRound)[number]) => number) => spread(perRound.map(f));
  console.log(
    `  kiln in process ${spread(
      perRound.map((r) => r.kiln!),
      1,
    )} tokens/s: ÷ one at a time ${ofKiln((r) => r.kiln! / r.single)}×, ÷ the padded ceiling ${ofKiln((r) => r.kiln! / r.ceilings.padded)}, ÷ the split ceiling ${ofKiln((r) => r.kiln! / r.ceilings.split)} (same rounds)`,
  );
}
console.log('fetching logits and new positions alone (the export as Kiln serves it):');
console.log(
  `  one at a time ${spread(
    perRound.map((r) => r.tapped.single),
    1,
  )}; rolling c${concurrency}, padded ${spread(
    perRound.map((r) => r.tapped.ceilings.padded),
    1,
  )}: ÷ one at a time ${spread(perRound.map((r) => r.tapped.ceilings.padded / r.tapped.single))}×, ÷ the padded ceiling fetching presents ${spread(perRound.map((r) => r.tapped.ceilings.padded / r.ceilings.padded))}×`,
);
if (kiln)
  console.log(
    `  kiln in process ÷ this padded ceiling ${spread(perRound.map((r) => r.kiln! / r.tapped.ceilings.padded))}, ÷ this split ceiling ${spread(perRound.map((r) => r.kiln! / r.tapped.ceilings.split))} (same rounds)`,
  );
console.log(`end: ${machineLine()}`);

/** Calls `send(i)` for each arrival once it is due and fewer than `concurrency` are in flight. */
async function closedLoop(
  arrivalsMs: readonly number[],
  concurrency: number,
  send: (i: number) => Promise<void>,
): Promise<void> {
  const start = performance.now();
  let free = concurrency;
  const waiting: (() => void)[] = [];
  await Promise.all(
    arrivalsMs.map(async (arrival, i) => {
      const wait = arrival - (performance.now() - start);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      if (free > 0) free--;
      else await new Promise<void>((resolve) => waiting.push(resolve));
      try {
        await send(i);
      } finally {
        const next = waiting.shift();
        if (next) next();
        else free++;
      }
    }),
  );
}
