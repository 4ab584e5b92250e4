// Microseconds per sampled token over a GPT-2-sized vocabulary: TokenSampler (heap walk)
// against the full sort it replaced, on the same logits, parameters and seeds.
//   node -C @kiln/source --import tsx bench/rolling-batch/sampler.ts [--tokens 200]
import { parseArgs } from 'node:util';
import { type SamplingParams, TokenSampler, argmax } from '@kiln/core';

const { values } = parseArgs({ options: { tokens: { type: 'string', default: '200' } } });
const tokens = Number(values.tokens);
const VOCAB = 50_257;

/** The sampler before partial selection: one sort of the whole vocabulary per token. */
function fullSortNext(params: SamplingParams, scores: Float64Array, u: number): number {
  if (!params.doSample) return argmax(scores);
  const temperature = params.temperature ?? 1;
  let order = Array.from(scores.keys()).sort((a, b) => scores[b]! - scores[a]! || a - b);
  const topK = params.topK ?? 0;
  if (topK > 0 && topK < order.length) order = order.slice(0, topK);
  const top = scores[order[0]!]!;
  const weights = order.map((t) => Math.exp((scores[t]! - top) / temperature));
  const total = weights.reduce((a, b) => a + b, 0);
  const topP = params.topP ?? 1;
  let keep = order.length;
  if (topP < 1) {
    let mass = 0;
    for (let i = 0; i < order.length; i++) {
      mass += weights[i]! / total;
      if (mass >= topP) {
        keep = i + 1;
        break;
      }
    }
  }
  let rest = u * weights.slice(0, keep).reduce((a, b) => a + b, 0);
  for (let i = 0; i < keep; i++) {
    rest -= weights[i]!;
    if (rest < 0) return order[i]!;
  }
  return order[keep - 1]!;
}

/** A language model's shape: a flat tail some nats below a few likely tokens. */
function modelLikeLogits(seed: number): Float32Array {
  let s = seed >>> 0;
  const random = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0), s / 2 ** 32);
  const logits = new Float32Array(VOCAB);
  for (let i = 0; i < VOCAB; i++) logits[i] = (random() + random() + random()) * 3;
  for (let i = 0; i < 20; i++) logits[Math.floor(random() * VOCAB)] = 14 + random() * 4;
  return logits;
}

const rows = Array.from({ length: 16 }, (_, i) => modelLikeLogits(i + 1));
const cases: Record<string, SamplingParams> = {
  greedy: {},
  'top_k 50': { doSample: true, topK: 50 },
  'top_p 0.9': { doSample: true, topP: 0.9 },
  'top_k 50, top_p 0.95': { doSample: true, topK: 50, topP: 0.95 },
  'sample, no top_k/top_p': { doSample: true },
};

const perToken = (run: (row: Float32Array) => void) => {
  const start = performance.now();
  for (let i = 0; i < tokens; i++) run(rows[i % rows.length]!);
  return ((performance.now() - start) * 1000) / tokens;
};

console.log(`V=${VOCAB}, ${tokens} tokens per case: µs per token`);
console.log('case'.padEnd(26), 'full sort'.padStart(10), 'heap'.padStart(10));
for (const [name, params] of Object.entries(cases)) {
  const sampler = new TokenSampler({ ...params, seed: 1 });
  const old = perToken((row) => fullSortNext(params, Float64Array.from(row), Math.random()));
  const now = perToken((row) => sampler.next(row, []));
  console.log(name.padEnd(26), old.toFixed(0).padStart(10), now.toFixed(0).padStart(10));
}
