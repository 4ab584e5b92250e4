// Where one decode step's time goes, by batch size and by how far the pasts spread: ONNX
// Runtime's run and Kiln's work around it (inputs, KV caches), stepping the decoder on this
// thread; then the same batches through a generation pool, whose step worker holds the decoder
// on its own thread: the per-step time in messages between threads is the rolling loop's round
// trip less the step worker's own time (only token ids cross). See bench/README.md.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type DecoderSequence, loadOrtStepDecoder } from '@kiln/engine-onnxruntime';
import { type GenerationStep, createGenerationPool } from '@kiln/worker-pool';
import { loadAverage, machineLine, median } from '../harness/figures.js';
import { BENCH_MODEL_OPTIONS, type BenchModel, benchModelFrom } from './bench-model.js';

const { values } = parseArgs({
  options: {
    ...BENCH_MODEL_OPTIONS,
    /** ONNX Runtime intra-op threads; see bench/README.md for why one is the default. */
    threads: { type: 'string', default: '1' },
    steps: { type: 'string', default: '30' },
    rounds: { type: 'string', default: '3' },
  },
});
const root = await mkdtemp(join(tmpdir(), 'kiln-bench-step-'));
const model: BenchModel = await benchModelFrom(values, root);
const decoder = await loadOrtStepDecoder(model.dir, {
  session: { intraOpNumThreads: Number(values.threads) },
});
const pool = await createGenerationPool({
  model: {
    url: model.dir,
    engines: ['@kiln/engine-onnxruntime'],
    overrides: {
      'option.rolling_batch': 'auto',
      'option.max_rolling_batch_size': '16',
      'option.intraOpNumThreads': values.threads,
    },
  },
  settings: { minWorkers: 1, maxWorkers: 1 },
});
let poolSteps: GenerationStep[] = [];
pool.onStep((step) => poolSteps.push(step));

interface Case {
  readonly label: string;
  readonly batch: number;
  readonly past: (row: number) => number;
  /** Reverse the rows every step, so that no step finds last step's batch. */
  readonly reshuffle?: boolean;
}
const cases: Case[] = [
  { label: 'b1, past 150', batch: 1, past: () => 150 },
  { label: 'b8, past 150', batch: 8, past: () => 150 },
  { label: 'b16, past 150', batch: 16, past: () => 150 },
  { label: 'b8, pasts 10–290', batch: 8, past: (r) => 10 + r * 40 },
  { label: 'b16, pasts 10–290', batch: 16, past: (r) => 10 + Math.round(r * 18.7) },
  { label: 'b16, past 150, new company every step', batch: 16, past: () => 150, reshuffle: true },
];

async function measure(c: Case) {
  const states: DecoderSequence[] = [];
  for (let row = 0; row < c.batch; row++) {
    const state = decoder.open();
    const prompt = Array.from({ length: c.past(row) }, (_, t) => (t * 7 + row) % 97);
    await decoder.step([{ state, tokens: prompt }]);
    states.push(state);
  }
  const step: number[] = [];
  const session: number[] = [];
  for (let s = 0; s < Number(values.steps); s++) {
    if (c.reshuffle) states.reverse();
    await decoder.step(states.map((state) => ({ state, tokens: [5] })));
    step.push(decoder.lastStepMs);
    session.push(decoder.lastSessionMs);
  }
  for (const state of states) decoder.release(state);
  return { step: median(step), session: median(session), messages: await messagesOf(c) };
}

/**
 * The case's decode steps on the pool's step worker: median round trip less the worker's
 * own time. Undefined for a reshuffled batch, which a rolling loop never makes.
 */
async function messagesOf(c: Case): Promise<number | undefined> {
  if (c.reshuffle) return undefined;
  poolSteps = [];
  const jobs = Array.from({ length: c.batch }, (_, row) => ({
    promptTokens: Array.from({ length: c.past(row) }, (_, t) => (t * 7 + row) % 97),
    maxNewTokens: Number(values.steps) + 1,
    ignoreEos: true,
  }));
  await Promise.all(jobs.map((job) => pool.predict(job)));
  const decodes = poolSteps.filter((s) => s.prefillTokens === 0 && s.sequences === c.batch);
  return median(decodes.map((s) => s.ms - s.hostMs));
}

console.log(machineLine());
console.log(`decoder: ${model.description}; intra-op threads ${values.threads}`);
const results = new Map<string, { step: number[]; ort: number[]; cache: number[]; trip: number[] }>(
  cases.map((c) => [c.label, { step: [], ort: [], cache: [], trip: [] }]),
);
for (let round = 0; round < Number(values.rounds); round++) {
  for (const c of round % 2 ? [...cases].reverse() : cases) {
    const m = await measure(c);
    const r = results.get(c.label)!;
    r.step.push(m.step);
    r.ort.push(m.session);
    r.cache.push(m.step - m.session);
    if (m.messages !== undefined) r.trip.push(m.messages);
  }
}
console.log(
  `median over ${values.rounds} rounds of ${values.steps} decode steps each (ms); messages: per-step time in messages between threads (a step worker's round trip less its own time)`,
);
console.log(
  `${'case'.padEnd(40)} ${'step'.padStart(7)} ${'ORT run'.padStart(8)} ${'inputs+KV'.padStart(10)} ${'messages'.padStart(9)} ${'per token'.padStart(10)}`,
);
for (const c of cases) {
  const r = results.get(c.label)!;
  const f = (xs: number[]) => (xs.length === 0 ? '–' : median(xs).toFixed(2));
  console.log(
    `${c.label.padEnd(40)} ${f(r.step).padStart(7)} ${f(r.ort).padStart(8)} ${f(r.cache).padStart(10)} ${f(r.trip).padStart(9)} ${(median(r.step) / c.batch).toFixed(3).padStart(10)}`,
  );
}
console.log(`load ${loadAverage()}`);
await pool.shutdown();
await decoder.close();
await rm(root, { recursive: true, force: true });
