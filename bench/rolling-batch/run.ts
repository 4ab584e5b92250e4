// Rolling (iteration-level) batching against request-level batching and one request at a
// time, on the same decoder, requests and arrival times. See bench/README.md.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RollingScheduler } from '@kiln/batching';
import { OrtStepDecoder } from '@kiln/engine-onnxruntime';
import { startInferenceThread } from '@kiln/worker-pool';
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
import { RequestLevelBatcher } from './request-level.js';
import { StepCounter } from './step-counter.js';
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
    /** OrtStepDecoder's decodeRunCost (Infinity: one decode run per step); default its estimate. */
    'decode-run-cost': { type: 'string' },
  },
});
const requests = Number(values.requests);
const rounds = Number(values.rounds);

const root = await mkdtemp(join(tmpdir(), 'kiln-bench-rolling-'));
const model: BenchModel = await benchModelFrom(values, root);
const decoder = await OrtStepDecoder.load(model.dir, {
  startThread: startInferenceThread,
  session: { intraOpNumThreads: Number(values.threads) },
  ...(values['decode-run-cost'] ? { decodeRunCost: Number(values['decode-run-cost']) } : {}),
});
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

// Every contender steps through this, so each run can say where its decode time went.
const counter = new StepCounter(decoder);
const REQUEST_LEVEL = 'request-level (batch 8)';
const ROLLING_8 = 'rolling (max 8)';
const ROLLING_16 = 'rolling (max 16)';
const SINGLE = 'one at a time';
const contenders: Record<string, () => Generator> = {
  [REQUEST_LEVEL]: () => new RequestLevelBatcher(counter, 8),
  [ROLLING_8]: () => new RollingScheduler(counter, { maxBatchSize: 8 }),
  [ROLLING_16]: () => new RollingScheduler(counter, { maxBatchSize: 16 }),
  [SINGLE]: () => new RequestLevelBatcher(counter, 1),
};
const names = Object.keys(contenders);

console.log(machineLine());
const { layers, heads, headSize } = decoder.signature;
console.log(
  `decoder: ${model.description}; ${layers} layers, ${heads} heads of ${headSize}, vocab ${decoder.vocabSize}; onnxruntime-node CPU, intra-op threads ${values.threads}`,
);
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
    console.log(
      `  ${t.steps} steps of ${(t.rows / t.steps).toFixed(1)} sequences; of ${(f.wallMs / 1000).toFixed(2)} s, ORT ${(t.ortMs / 1000).toFixed(2)} s, inputs+KV ${((t.threadMs - t.ortMs) / 1000).toFixed(2)} s, messages ${((t.tripMs - t.threadMs) / 1000).toFixed(2)} s`,
    );
  }
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

await decoder.close();
await rm(root, { recursive: true, force: true });
