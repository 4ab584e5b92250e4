// Rolling (iteration-level) batching against request-level batching and one request at a
// time, on the same decoder, requests and arrival times. Rolling batching runs as the server
// runs it: a generation pool whose step worker holds the decoder on its own thread, with only
// token ids crossing per step; the others step the decoder on this thread. With --python, the
// decoder is a Llama-style torch model in a Python step handler (python-decoder/model.py), on
// --device (cpu, or gpu0 where torch sees a GPU). See bench/README.md.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { StepDecoder } from '@kiln/core';
import { type GenerationPool, createGenerationPool } from '@kiln/worker-pool';
import {
  type Goal,
  formatSpread,
  goalLine,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';
import { BENCH_MODEL_OPTIONS, type BenchModel, benchModelFrom } from './bench-model.js';
import {
  PYTHON_DECODER_OPTIONS,
  pythonDecoderFolder,
  pythonStepDecoder,
} from './python-decoder.js';
import { RequestLevelBatcher } from './request-level.js';
import { StepCounter, type StepTotals } from './step-counter.js';
import { type Generator, type RunFigures, makeWorkload, runWorkload } from './workload.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    'gap-ms': { type: 'string', default: '15' },
    'prompt-max': { type: 'string', default: '64' },
    ...BENCH_MODEL_OPTIONS,
    /** ONNX Runtime intra-op threads; see bench/README.md for why one is the default. */
    threads: { type: 'string', default: '1' },
    ...PYTHON_DECODER_OPTIONS,
  },
});
const requests = Number(values.requests);
const rounds = Number(values.rounds);

const root = await mkdtemp(join(tmpdir(), 'kiln-bench-rolling-'));
const model: BenchModel = values.python
  ? await pythonDecoderFolder(root, values)
  : await benchModelFrom(values, root);
const { decoder, details } = values.python
  ? { decoder: await pythonStepDecoder(model.dir, values.device), details: '' }
  : await ortDecoder();

/** The ONNX decoder and what to say of it; imported here, as the GPU kit runs --python without ONNX Runtime. */
async function ortDecoder(): Promise<{
  decoder: StepDecoder<unknown> & { close(): Promise<void> };
  details: string;
}> {
  const { loadOrtStepDecoder } = await import('@kiln/engine-onnxruntime');
  const ort = await loadOrtStepDecoder(model.dir, {
    session: { intraOpNumThreads: Number(values.threads) },
  });
  const { layers, heads, headSize } = ort.signature;
  return {
    decoder: ort,
    details: `; ${layers} layers, ${heads} heads of ${headSize}, vocab ${ort.vocabSize}; onnxruntime-node CPU, intra-op threads ${values.threads}`,
  };
}

/** One step worker over the bench model, decoding up to `maxBatchSize` sequences at once. */
async function rollingPool(maxBatchSize: number): Promise<GenerationPool> {
  const pool = await createGenerationPool({
    model: {
      url: model.dir,
      engines: [values.python ? '@kiln/engine-python' : '@kiln/engine-onnxruntime'],
      overrides: {
        'option.rolling_batch': 'auto',
        'option.max_rolling_batch_size': String(maxBatchSize),
        'option.intraOpNumThreads': values.threads,
      },
    },
    settings: { minWorkers: 1, maxWorkers: 1 },
  });
  pool.onStep((step) => {
    const t = counter.totals;
    t.steps++;
    t.rows += step.sequences;
    t.stepMs += step.hostMs;
    // A step answered from one taken ahead may come back sooner than its own compute took:
    // that overlap hides the crossing, which then costs the step nothing.
    t.tripMs += Math.max(step.ms, step.hostMs);
  });
  return pool;
}
const workload = makeWorkload({
  requests,
  vocab: decoder.vocabSize,
  promptMin: 8,
  promptMax: Number(values['prompt-max']),
  outputMin: 8,
  outputMax: 256,
  meanGapMs: Number(values['gap-ms']),
  seed: 7,
  ...(model.prompt ? { prompt: model.prompt } : {}),
});

// Every contender's steps add up here, so each run can say where its decode time went.
const counter = new StepCounter(decoder);
const pools = [await rollingPool(8), await rollingPool(16)];
const REQUEST_LEVEL = 'request-level (batch 8)';
const ROLLING_8 = 'rolling (max 8)';
const ROLLING_16 = 'rolling (max 16)';
const SINGLE = 'one at a time';
const contenders: Record<string, () => Generator> = {
  [REQUEST_LEVEL]: () => new RequestLevelBatcher(counter, 8),
  [ROLLING_8]: () => ({ generate: (job) => pools[0]!.predict(job) }),
  [ROLLING_16]: () => ({ generate: (job) => pools[1]!.predict(job) }),
  [SINGLE]: () => new RequestLevelBatcher(counter, 1),
};
const names = Object.keys(contenders);

console.log(machineLine());
console.log(`decoder: ${model.description}${details}`);
console.log(
  `workload: ${requests} requests, Poisson arrivals (mean gap ${values['gap-ms']} ms), prompts 8–${values['prompt-max']} tokens (${model.prompt ? 'from the Psalms' : 'random'}), outputs 8–256 (${workload.requests.reduce((n, r) => n + r.maxNewTokens, 0)} tokens), greedy, no end-of-sequence`,
);

// Warm-up: a few requests through each contender.
const warm = { requests: workload.requests.slice(0, 4), arrivalsMs: [0, 0, 0, 0] };
for (const name of names) await runWorkload(contenders[name]!(), warm);
counter.take();

const figures: Record<string, RunFigures[]> = Object.fromEntries(names.map((n) => [n, []]));
for (let round = 0; round < rounds; round++) {
  for (const name of orderOf(names, round)) {
    const f = await runWorkload(contenders[name]!(), workload);
    const t = counter.take();
    figures[name]!.push(f);
    console.log(
      `round ${round + 1} ${name.padEnd(24)} ${f.tokensPerS.toFixed(0).padStart(6)} tokens/s  TTFT p50 ${f.ttftP50Ms.toFixed(0).padStart(6)} ms  inter-token p50 ${f.interTokenP50Ms.toFixed(2)} / p99 ${f.interTokenP99Ms.toFixed(2)} ms  load ${loadAverage()}`,
    );
    console.log(`  ${stepLine(t, f.wallMs)}`);
  }
}

/** Where a run's decode time went; a step worker's steps also say what their messages cost. */
function stepLine(t: StepTotals, wallMs: number): string {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  const line = `${t.steps} steps of ${(t.rows / t.steps).toFixed(1)} sequences; of ${s(wallMs)}`;
  if (t.tripMs === 0) return `${line}, ORT ${s(t.ortMs)}, inputs+KV ${s(t.stepMs - t.ortMs)}`;
  const messagesMs = t.tripMs - t.stepMs;
  return `${line}, on the step worker's thread ${s(t.stepMs)}, messages between threads ${s(messagesMs)} (${(messagesMs / t.steps).toFixed(3)} ms per step)`;
}

const series = (name: string, pick: (f: RunFigures) => number) => figures[name]!.map(pick);
console.log('\nmedian [min–max] over rounds');
for (const name of names) {
  console.log(
    `${name.padEnd(24)} tokens/s ${formatSpread(spreadOf(series(name, (f) => f.tokensPerS)), 0)}  TTFT p50 ${formatSpread(spreadOf(series(name, (f) => f.ttftP50Ms)), 0)} ms  inter-token p99 ${formatSpread(spreadOf(series(name, (f) => f.interTokenP99Ms)), 1)} ms`,
  );
}
const ratio = (a: string, b: string, goal: Goal) => {
  console.log(
    goalLine(
      `${a} vs ${b}, tokens/s`,
      ratioSpread(
        series(a, (f) => f.tokensPerS),
        series(b, (f) => f.tokensPerS),
      ),
      goal,
    ),
  );
  console.log(
    `  TTFT p50 ${a} ÷ ${b}: ${formatSpread(
      ratioSpread(
        series(a, (f) => f.ttftP50Ms),
        series(b, (f) => f.ttftP50Ms),
      ),
      2,
    )}× (≤ 1 is equal or better)`,
  );
};
console.log('\nratios from the same rounds');
ratio(ROLLING_16, REQUEST_LEVEL, { atLeast: 3 });
ratio(ROLLING_8, REQUEST_LEVEL, { atLeast: 3 });
ratio(ROLLING_8, SINGLE, { atLeast: 4 });
ratio(ROLLING_16, SINGLE, { atLeast: 4 });
const reference = figures[names[0]!]![0]!.outputs;
const same = names.every((n) =>
  figures[n]!.every((f) => f.outputs.every((o, i) => o.join() === reference[i]!.join())),
);
console.log(`every contender generated the same tokens for every request: ${same}`);
if (model.decode) {
  const first = workload.requests[0]!;
  console.log(
    `request 1: ${JSON.stringify(model.decode(first.promptTokens))} → ${JSON.stringify(model.decode(reference[0]!.slice(0, 40)))}…`,
  );
}
console.log(machineLine());

await Promise.all(pools.map((pool) => pool.shutdown()));
await decoder.close();
await rm(root, { recursive: true, force: true });
