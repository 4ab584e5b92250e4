// Decode steps over sequences of mixed ages, as rolling batching makes them: Kiln's
// OrtStepDecoder with its decode run cost learned from the runs it times (the default), its
// decode rows grouped by past as the rolling loop groups them (groupByPast, regrouped when the
// company changes), against the same decoder with one run per step (`decodeRunCost: Infinity`, what the size estimate
// gives a model whose weights dwarf its cache). Each contender keeps `--slots` sequences in
// flight: a sequence prefills its prompt (8–64 tokens) in a step of its own, then decodes its
// drawn length (8–256 tokens) one token a step beside the others, and a new one takes its slot
// when it ends — the same sequences, in the same order, for both. See bench/README.md.
//   node -C @kiln/source --import tsx bench/rolling-batch/mixed-pasts.ts --model DIR [--sequences 48] [--rounds 3] [--threads 2]
import { parseArgs } from 'node:util';
import { groupByPast } from '@kiln/batching';
import {
  DEFAULT_SESSION_CONFIG,
  type DecoderSequence,
  type OrtStepDecoder,
  loadOrtStepDecoder,
} from '@kiln/engine-onnxruntime';
import { seededRandom } from '@kiln/testing';
import {
  formatSpread,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';

const { values } = parseArgs({
  options: {
    /** A Llama- or GPT-2-style decoder folder (transformers.js layout), e.g. bench/llm's. */
    model: { type: 'string' },
    sequences: { type: 'string', default: '48' },
    slots: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '3' },
    threads: { type: 'string', default: '2' },
  },
});
if (!values.model)
  throw new Error('--model DIR: a decoder folder (bench/llm/vs-transformers-js.ts names its own)');
const slots = Number(values.slots);
const rounds = Math.max(3, Number(values.rounds));

/** Prompt and output lengths, drawn once: both contenders decode the same sequences. */
const random = seededRandom(11);
const draws = Array.from({ length: Number(values.sequences) }, () => ({
  prompt: 8 + Math.floor(random() * 57),
  output: 8 + Math.floor(random() * 249),
}));

const session = { ...DEFAULT_SESSION_CONFIG, intraOpNumThreads: Number(values.threads) };
const contenders = {
  learned: await loadOrtStepDecoder(values.model, { session }),
  'one run': await loadOrtStepDecoder(values.model, { session, decodeRunCost: Infinity }),
};
type Name = keyof typeof contenders;

interface Live {
  readonly state: DecoderSequence;
  readonly prompt: number[];
  left: number;
  prefilled: boolean;
}

/** Decoded tokens a second over the whole workload. */
async function run(decoder: OrtStepDecoder): Promise<number> {
  const vocab = decoder.signature.vocabSize;
  const waiting = [...draws];
  let live: Live[] = [];
  /** Each decoding sequence's run, kept while the same sequences decode (as the loop does). */
  let runs: Map<Live, number> | undefined;
  let tokens = 0;
  const started = performance.now();
  while (waiting.length > 0 || live.length > 0) {
    while (live.length < slots && waiting.length > 0) {
      const { prompt, output } = waiting.shift()!;
      live.push({
        state: decoder.open(),
        prompt: Array.from({ length: prompt }, (_, i) => (i * 31 + 7) % vocab),
        left: output,
        prefilled: false,
      });
    }
    // One prompt a step, in a step of its own; otherwise every sequence decodes a token.
    const fresh = live.find((s) => !s.prefilled);
    if (fresh) {
      await decoder.step([{ state: fresh.state, tokens: fresh.prompt }]);
      fresh.prefilled = true;
      runs = undefined;
      continue;
    }
    if (!runs) {
      const grouped = new Map<Live, number>();
      const pasts = live.map((s) => s.state.length);
      groupByPast(pasts, decoder.decodeRunCost).forEach((rows, run) => {
        for (const row of rows) grouped.set(live[row]!, run);
      });
      runs = grouped;
    }
    const decoding = runs;
    await decoder.step(live.map((s) => ({ state: s.state, tokens: [1], run: decoding.get(s)! })));
    tokens += live.length;
    for (const s of live) if (--s.left === 0) decoder.release(s.state);
    const left = live.filter((s) => s.left > 0);
    if (left.length < live.length) runs = undefined;
    live = left;
  }
  return tokens / ((performance.now() - started) / 1000);
}

console.log(machineLine());
console.log(
  `decoder: ${values.model}; onnxruntime-node CPU, ${values.threads} intra-op threads; ${draws.length} sequences, ${slots} in flight, prompts 8–64, outputs 8–256 tokens; ${rounds} rounds, alternating`,
);
// One untimed pass each: warm sessions, and runs the learned costs have seen.
for (const decoder of Object.values(contenders)) await run(decoder);
const figures: Record<Name, number[]> = { learned: [], 'one run': [] };
for (let round = 0; round < rounds; round++) {
  for (const name of orderOf(Object.keys(contenders) as Name[], round))
    figures[name].push(await run(contenders[name]));
  console.log(
    `  round ${round + 1}: learned ${figures.learned.at(-1)!.toFixed(1)}, one run ${figures['one run'].at(-1)!.toFixed(1)} decoded tokens/s; load ${loadAverage()}`,
  );
}
console.log(`learned run cost: ${contenders.learned.decodeRunCost.toFixed(0)} padded positions`);
for (const name of Object.keys(figures) as Name[])
  console.log(`${name}: ${formatSpread(spreadOf(figures[name]))} decoded tokens/s`);
console.log(
  `learned ÷ one run, same rounds: ${formatSpread(ratioSpread(figures.learned, figures['one run']), 2)}`,
);
console.log(`end: ${machineLine()}`);
for (const decoder of Object.values(contenders)) await decoder.close();
