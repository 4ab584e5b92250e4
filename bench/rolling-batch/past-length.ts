// Decode time per token against past length: Kiln's OrtStepDecoder against a bare ONNX
// Runtime session fed the same pasts directly, each step's presents as the next step's pasts
// (the floor: ORT's own work, whose graph copies every past into its present). Kiln ÷ raw
// that stays flat as the past grows says Kiln adds no copy of the cache that grows with it.
// See bench/README.md.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import {
  DEFAULT_SESSION_CONFIG,
  type DecoderSequence,
  type OrtStepDecoder,
  loadOrt,
  loadOrtStepDecoder,
  toSessionOptions,
} from '@kiln/engine-onnxruntime';
import { LLAMA_MODEL_FILE, llamaDecoderModel, pythonTorchUnavailable } from '@kiln/model-tools';
import {
  formatSpread,
  goalLine,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';

const { values } = parseArgs({
  options: {
    /** A Llama-style decoder folder (transformers.js layout); default: one made here. */
    model: { type: 'string' },
    pasts: { type: 'string', default: '16,64,256,1024' },
    batches: { type: 'string', default: '1,8' },
    /** Timed decode steps per case and round, after two untimed ones. */
    steps: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    /** ONNX Runtime intra-op threads, for both. */
    threads: { type: 'string', default: '1' },
    hidden: { type: 'string', default: '256' },
    layers: { type: 'string', default: '4' },
  },
});
const pasts = values.pasts.split(',').map(Number);
const batches = values.batches.split(',').map(Number);
const steps = Number(values.steps);
const rounds = Number(values.rounds);
const WARM_STEPS = 2;

// Garbage collection inside the timed steps: every step returns fresh presents (the whole
// cache, from ONNX Runtime) for both, so collecting them grows with the past for both.
const collections: { start: number; end: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    collections.push({ start: e.startTime, end: e.startTime + e.duration });
}).observe({ entryTypes: ['gc'] });
/** ms of collection within [from, to], once the observer has reported it. */
async function collectedMs(from: number, to: number): Promise<number> {
  await new Promise((resolve) => setTimeout(resolve, 5));
  return collections
    .filter((c) => c.start >= from && c.start < to)
    .reduce((ms, c) => ms + Math.min(c.end, to) - c.start, 0);
}

const root = await mkdtemp(join(tmpdir(), 'kiln-bench-past-'));
let dir = values.model;
if (dir === undefined) {
  const problem = pythonTorchUnavailable();
  if (problem) throw new Error(`cannot make the Llama decoder: ${problem}; pass --model`);
  const made = await llamaDecoderModel(join(root, 'llama'), {
    hidden: Number(values.hidden),
    layers: Number(values.layers),
    heads: 8,
    kvHeads: 4,
    maxLen: Math.max(...pasts) + WARM_STEPS + steps + 8,
  });
  dir = made.dir;
}
const session = { ...DEFAULT_SESSION_CONFIG, intraOpNumThreads: Number(values.threads) };
const kiln = await loadOrtStepDecoder(dir, { session });
const ort = await loadOrt();
// The same file and session options as Kiln's decoder.
const raw = await ort.InferenceSession.create(
  join(dir, LLAMA_MODEL_FILE),
  toSessionOptions(session),
);
const { layers, heads, headSize, vocabSize } = kiln.signature;

/** ms per token of the timed steps, and of garbage collection within them. */
interface PerToken {
  readonly ms: number;
  readonly gcMs: number;
}

/**
 * ms per token of `steps` decode steps, `batch` sequences at `past` positions, through Kiln:
 * in all, and in its session's run.
 */
async function kilnPerToken(
  decoder: OrtStepDecoder,
  batch: number,
  past: number,
): Promise<PerToken & { sessionMs: number }> {
  const sequences = Array.from({ length: batch }, () => decoder.open());
  const prompt = Array.from({ length: past }, (_, i) => (i * 31 + 7) % vocabSize);
  const feed = (tokens: number[]) => sequences.map((state: DecoderSequence) => ({ state, tokens }));
  await decoder.step(feed(prompt));
  // The first decode step gathers the batch; the ones after run on its resident tensors.
  for (let s = 0; s < WARM_STEPS; s++) await decoder.step(feed([1]));
  let sessionMs = 0;
  const started = performance.now();
  for (let s = 0; s < steps; s++) {
    await decoder.step(feed([1]));
    sessionMs += decoder.lastSessionMs;
  }
  const ended = performance.now();
  for (const state of sequences) decoder.release(state);
  const perToken = (ms: number) => ms / (steps * batch);
  return {
    ms: perToken(ended - started),
    sessionMs: perToken(sessionMs),
    gcMs: perToken(await collectedMs(started, ended)),
  };
}

/** The same steps on a bare session: pasts fed as tensors, presents fed back as they come. */
async function rawPerToken(batch: number, past: number): Promise<PerToken> {
  const shape = (length: number) => [batch, heads, length, headSize];
  let caches: Record<string, InstanceType<typeof ort.Tensor>> = {};
  for (let layer = 0; layer < layers; layer++)
    for (const kind of ['key', 'value']) {
      const data = Float32Array.from({ length: batch * heads * past * headSize }, (_, i) =>
        Math.sin(i),
      );
      caches[`past_key_values.${layer}.${kind}`] = new ort.Tensor('float32', data, shape(past));
    }
  const step = async (length: number) => {
    const feeds = {
      input_ids: new ort.Tensor('int64', new BigInt64Array(batch).fill(1n), [batch, 1]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(batch * (length + 1)).fill(1n), [
        batch,
        length + 1,
      ]),
      position_ids: new ort.Tensor('int64', new BigInt64Array(batch).fill(BigInt(length)), [
        batch,
        1,
      ]),
      ...caches,
    };
    const out = await raw.run(feeds);
    const next: typeof caches = {};
    for (let layer = 0; layer < layers; layer++)
      for (const kind of ['key', 'value'])
        next[`past_key_values.${layer}.${kind}`] = out[`present.${layer}.${kind}`]!;
    caches = next;
  };
  let length = past;
  for (let s = 0; s < WARM_STEPS; s++) await step(length++);
  const started = performance.now();
  for (let s = 0; s < steps; s++) await step(length++);
  const ended = performance.now();
  const perToken = (ms: number) => ms / (steps * batch);
  return { ms: perToken(ended - started), gcMs: perToken(await collectedMs(started, ended)) };
}

console.log(machineLine());
console.log(
  `decoder: ${values.model ?? `Llama-style, made here (hidden ${values.hidden})`}; ${layers} layers, ${heads} key/value heads of ${headSize}, vocab ${vocabSize}; onnxruntime-node CPU, intra-op threads ${values.threads}`,
);
console.log(
  `per case: a prompt of the past's length prefilled, ${WARM_STEPS} untimed then ${steps} timed decode steps (ms per token = time ÷ steps ÷ batch), ${rounds} rounds, Kiln and raw alternating`,
);

interface Figures {
  kiln: number[];
  /** Kiln's session runs alone: ONNX Runtime's time inside Kiln's steps. */
  kilnSession: number[];
  kilnGc: number[];
  raw: number[];
  rawGc: number[];
}
const results = new Map<string, Figures>();
const label = (batch: number, past: number) => `batch ${batch}, past ${past}`;
for (let round = 0; round < rounds; round++) {
  for (const batch of batches) {
    for (const past of pasts) {
      const f = results.get(label(batch, past)) ?? {
        kiln: [],
        kilnSession: [],
        kilnGc: [],
        raw: [],
        rawGc: [],
      };
      results.set(label(batch, past), f);
      for (const who of orderOf(['kiln', 'raw'] as const, round)) {
        if (who === 'raw') {
          const { ms, gcMs } = await rawPerToken(batch, past);
          f.raw.push(ms);
          f.rawGc.push(gcMs);
        } else {
          const { ms, sessionMs, gcMs } = await kilnPerToken(kiln, batch, past);
          f.kiln.push(ms);
          f.kilnSession.push(sessionMs);
          f.kilnGc.push(gcMs);
        }
      }
      console.log(
        `round ${round + 1} ${label(batch, past).padEnd(20)} Kiln ${f.kiln.at(-1)!.toFixed(3)} ms/token (its session run ${f.kilnSession.at(-1)!.toFixed(3)})  raw ${f.raw.at(-1)!.toFixed(3)} ms/token  load ${loadAverage()}`,
      );
    }
  }
}

console.log(
  "\nms per token, median [min–max] over rounds; Kiln ÷ raw from the same rounds. Kiln's own: its step less its session run. gc: garbage collection within the steps (both collect the presents each step returns; it may overlap a session run, which runs off this thread)",
);
const perRound = (f: Figures, pick: (r: number) => number) => f.kiln.map((_, r) => pick(r));
for (const [name, f] of results) {
  const own = perRound(f, (r) => f.kiln[r]! - f.kilnSession[r]!);
  console.log(
    `${name.padEnd(20)} Kiln ${formatSpread(spreadOf(f.kiln), 3)} (its own ${formatSpread(spreadOf(own), 3)}, gc ${formatSpread(spreadOf(f.kilnGc), 3)})  raw ${formatSpread(spreadOf(f.raw), 3)} (gc ${formatSpread(spreadOf(f.rawGc), 3)})  Kiln ÷ raw ${formatSpread(ratioSpread(f.kiln, f.raw), 2)}×`,
  );
}
for (const batch of batches) {
  const ratios = pasts.map((past) => {
    const f = results.get(label(batch, past))!;
    return ratioSpread(f.kiln, f.raw);
  });
  console.log(
    `batch ${batch}: Kiln ÷ raw from past ${pasts[0]} to ${pasts.at(-1)}: ${ratios.map((r) => r.median.toFixed(2)).join(' → ')}`,
  );
  // A copy of the cache that grows with the past would raise the ratio at the longest past:
  // per round, Kiln ÷ raw there over Kiln ÷ raw at the shortest.
  const ratioOf = (past: number) => {
    const f = results.get(label(batch, past))!;
    return f.kiln.map((k, r) => k / f.raw[r]!);
  };
  const growth = ratioSpread(ratioOf(pasts.at(-1)!), ratioOf(pasts[0]!));
  console.log(
    goalLine(
      `  batch ${batch}, Kiln ÷ raw at past ${pasts.at(-1)} over at past ${pasts[0]}`,
      growth,
      { atMost: 1.1 },
    ),
  );
}
console.log(machineLine());

await kiln.close();
await raw.release();
await rm(root, { recursive: true, force: true });
