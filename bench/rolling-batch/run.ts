// Rolling (iteration-level) batching against request-level batching and one request at a
// time, on the same decoder, requests and arrival times. See bench/README.md.
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { RollingScheduler } from '@kiln/batching';
import { OrtStepDecoder } from '@kiln/engine-onnxruntime';
import { gptDecoderModel } from '@kiln/model-tools';
import { RequestLevelBatcher } from './request-level.js';
import { type Generator, type RunFigures, makeWorkload, median, runWorkload } from './workload.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    'gap-ms': { type: 'string', default: '15' },
    'prompt-max': { type: 'string', default: '64' },
    layers: { type: 'string', default: '4' },
    hidden: { type: 'string', default: '512' },
    attention: { type: 'string', default: '64' },
    heads: { type: 'string', default: '2' },
    'skip-single': { type: 'boolean', default: false },
  },
});
const requests = Number(values.requests);
const rounds = Number(values.rounds);
const hidden = Number(values.hidden);
const layers = Number(values.layers);
const attentionDim = Number(values.attention);
const heads = Number(values.heads);

const root = await mkdtemp(join(tmpdir(), 'kiln-bench-rolling-'));
const model = await gptDecoderModel(join(root, 'gpt'), {
  layers,
  hidden,
  heads,
  attentionDim,
  maxLen: 512,
});
const decoder = await OrtStepDecoder.load(model.dir, {
  session: { intraOpNumThreads: availableParallelism() },
});
const workload = makeWorkload({
  requests,
  vocab: model.vocabSize,
  promptMin: 8,
  promptMax: Number(values['prompt-max']),
  outputMin: 8,
  outputMax: 256,
  meanGapMs: Number(values['gap-ms']),
  seed: 7,
});

const contenders: Record<string, () => Generator> = {
  'request-level (batch 8)': () => new RequestLevelBatcher(decoder, 8),
  'rolling (max 8)': () => new RollingScheduler(decoder, { maxBatchSize: 8 }),
  'rolling (max 16)': () => new RollingScheduler(decoder, { maxBatchSize: 16 }),
};
if (!values['skip-single']) contenders['one at a time'] = () => new RequestLevelBatcher(decoder, 1);
const names = Object.keys(contenders);

console.log(
  `decoder: ${layers} layers, hidden ${hidden}, ${heads} heads of ${attentionDim / heads}, vocab ${model.vocabSize} (random weights, onnxruntime-node CPU, intra-op ${availableParallelism()})`,
);
console.log(
  `workload: ${requests} requests, Poisson arrivals (mean gap ${values['gap-ms']} ms), prompts 8–${values['prompt-max']}, outputs 8–256 (${workload.requests.reduce((n, r) => n + r.maxNewTokens, 0)} tokens), greedy`,
);

// Warm-up: a few requests through each contender.
const warm = { requests: workload.requests.slice(0, 4), arrivalsMs: [0, 0, 0, 0] };
for (const name of names) await runWorkload(contenders[name]!(), warm);

const figures: Record<string, RunFigures[]> = Object.fromEntries(names.map((n) => [n, []]));
for (let round = 0; round < rounds; round++) {
  // Alternate the order so that no contender always runs first or last.
  const order = names.map((_, i) => names[(i + round) % names.length]!);
  for (const name of order) {
    const f = await runWorkload(contenders[name]!(), workload);
    figures[name]!.push(f);
    console.log(
      `round ${round + 1} ${name.padEnd(24)} ${f.tokensPerS.toFixed(0).padStart(6)} tokens/s  TTFT p50 ${f.ttftP50Ms.toFixed(1).padStart(7)} ms  inter-token p50 ${f.interTokenP50Ms.toFixed(2)} / p99 ${f.interTokenP99Ms.toFixed(2)} ms  load ${loadavg()[0]!.toFixed(2)}`,
    );
  }
}

const span = (xs: number[], digits: number) =>
  `${median(xs).toFixed(digits)} [${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}]`;
console.log('\nmedian [min–max] over rounds');
for (const name of names) {
  const fs = figures[name]!;
  console.log(
    `${name.padEnd(24)} tokens/s ${span(
      fs.map((f) => f.tokensPerS),
      0,
    )}  TTFT p50 ${span(
      fs.map((f) => f.ttftP50Ms),
      1,
    )} ms  inter-token p99 ${span(
      fs.map((f) => f.interTokenP99Ms),
      2,
    )} ms`,
  );
}
const ratio = (a: string, b: string) => {
  if (!figures[a] || !figures[b]) return;
  const rs = figures[a].map((f, i) => f.tokensPerS / figures[b]![i]!.tokensPerS);
  const ttft = figures[a].map((f, i) => f.ttftP50Ms / figures[b]![i]!.ttftP50Ms);
  console.log(`${a} vs ${b}: tokens/s ×${span(rs, 2)}, TTFT p50 ×${span(ttft, 2)} (same rounds)`);
};
console.log('');
ratio('rolling (max 8)', 'request-level (batch 8)');
ratio('rolling (max 16)', 'request-level (batch 8)');
ratio('rolling (max 8)', 'one at a time');
ratio('rolling (max 16)', 'one at a time');
const reference = figures[names[0]!]![0]!.outputs;
const same = names.every((n) =>
  figures[n]!.every((f) => f.outputs.every((o, i) => o.join() === reference[i]!.join())),
);
console.log(`every contender generated the same tokens for every request: ${same}`);
console.log(`load average (1 min) at the end: ${loadavg()[0]!.toFixed(2)}`);

await decoder.close();
await rm(root, { recursive: true, force: true });
