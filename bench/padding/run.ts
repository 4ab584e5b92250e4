/**
 * Sequence bucketing against padding every batch to the maximum length, on a BERT-style
 * encoder with random lengths 8–512. Same batch size, delay, workers and requests for each;
 * prints throughput, latency, padding and the ratios.
 *
 *   node -C @kiln/source --import tsx bench/padding/run.ts [--requests 192] [--workers 2] [--batch 8] …
 */
import { existsSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { lengthBucketer } from '@kiln/batching';
import { CPU, type Model, Predictor, type Translator, servingPropertiesFrom } from '@kiln/core';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { MODEL_FILE, transformerEncoderModel } from '@kiln/model-tools';
import {
  type Encoding,
  maxLengthTranslator,
  paddedBatchTranslator,
} from './sequence-translators.js';
import { type ServeResult, serve } from './serve-loop.js';
import { type SequenceRequest, sequenceRequests } from './workload.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '192' },
    workers: { type: 'string', default: '2' },
    batch: { type: 'string', default: '8' },
    delay: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    layers: { type: 'string', default: '4' },
    hidden: { type: 'string', default: '256' },
    heads: { type: 'string', default: '4' },
    'max-len': { type: 'string', default: '512' },
    'min-len': { type: 'string', default: '8' },
    buckets: { type: 'string', default: '16,32,64,128,256,512' },
    seed: { type: 'string', default: '7' },
  },
});
const int = (name: keyof typeof args) => {
  const value = Number(args[name]);
  if (!Number.isSafeInteger(value) || value < 0)
    throw new Error(`--${name} must be an integer ≥ 0`);
  return value;
};

interface Configuration {
  readonly name: string;
  readonly translator: Translator<SequenceRequest, Encoding>;
  readonly bucketOf?: (request: SequenceRequest) => number;
  readonly paddedLength: (requests: readonly SequenceRequest[]) => number;
}

const longest = (requests: readonly SequenceRequest[]) =>
  Math.max(...requests.map((r) => r.ids.length));

async function main(): Promise<void> {
  const maxLen = int('max-len');
  const workers = int('workers');
  const shape = { layers: int('layers'), hidden: int('hidden'), heads: int('heads'), maxLen };
  const dir = join(tmpdir(), 'kiln-bench-padding', `encoder-${Object.values(shape).join('x')}`);
  const encoder = existsSync(join(dir, MODEL_FILE))
    ? { dir, vocabSize: 30522 }
    : await transformerEncoderModel(dir, shape);

  const engine = await createOnnxRuntimeEngine().load();
  const model: Model = await engine.loadModel({
    name: 'encoder',
    modelDir: encoder.dir,
    modelFile: MODEL_FILE,
    device: CPU,
    options: {},
    properties: servingPropertiesFrom({}),
  });
  const intraOpThreads = Math.max(1, Math.floor(availableParallelism() / workers));
  const boundaries = args.buckets.split(',').map(Number);
  const configurations: Configuration[] = [
    {
      name: `pad to max length (${maxLen})`,
      translator: maxLengthTranslator(maxLen),
      paddedLength: () => maxLen,
    },
    {
      name: 'pad to batch max, no buckets',
      translator: paddedBatchTranslator(),
      paddedLength: longest,
    },
    {
      name: `buckets ${boundaries.join('/')} + pad to batch max`,
      translator: paddedBatchTranslator(),
      bucketOf: lengthBucketer(boundaries, (r: SequenceRequest) => r.ids.length),
      paddedLength: longest,
    },
  ];

  const workload = { minLength: int('min-len'), maxLength: maxLen, vocabSize: encoder.vocabSize };
  const requests = sequenceRequests(int('requests'), { ...workload, seed: int('seed') });
  const warmUp = sequenceRequests(2 * int('batch') * workers, {
    ...workload,
    seed: int('seed') + 1,
  });
  const settings = {
    batchSize: int('batch'),
    maxDelayMs: int('delay'),
    concurrency: int('concurrency'),
  };
  console.log(
    `encoder ${JSON.stringify(shape)}; ${requests.length} requests, lengths ${workload.minLength}–${maxLen} ` +
      `(seed ${args.seed}); batch ${settings.batchSize}, delay ${settings.maxDelayMs} ms, ` +
      `${workers} workers × ${intraOpThreads} intra-op threads, ${settings.concurrency} clients, ` +
      `${args.rounds} rounds (median)`,
  );

  const runs = new Map<Configuration, ServeResult[]>();
  const predictors = new Map<Configuration, Predictor<SequenceRequest, Encoding>[]>();
  for (const c of configurations) {
    const own = await Promise.all(
      Array.from({ length: workers }, () =>
        Predictor.create(model, c.translator, { intraOpThreads }),
      ),
    );
    predictors.set(c, own);
    await serve({ ...settings, ...c, predictors: own, requests: warmUp });
    runs.set(c, []);
  }
  // Rounds interleave the configurations so that drift on a shared machine hits all alike.
  for (let round = 0; round < int('rounds'); round++) {
    for (const c of configurations) {
      runs
        .get(c)!
        .push(await serve({ ...settings, ...c, predictors: predictors.get(c)!, requests }));
    }
  }

  const median = (c: Configuration) => {
    const sorted = [...runs.get(c)!].sort((a, b) => a.throughput - b.throughput);
    return sorted[Math.floor(sorted.length / 2)]!;
  };
  const rows = configurations.map((c) => {
    const r = median(c);
    return {
      configuration: c.name,
      'req/s': r.throughput.toFixed(1),
      'req/CPU-s': r.perCpuSecond.toFixed(1),
      'p50 ms': r.latencyMs.p50.toFixed(0),
      'p99 ms': r.latencyMs.p99.toFixed(0),
      'mean batch': r.meanBatchSize.toFixed(2),
      'computed/real tokens': r.paddingFactor.toFixed(2),
    };
  });
  console.table(rows);
  const [maxPad, batchPad, bucketed] = configurations.map(median) as [
    ServeResult,
    ServeResult,
    ServeResult,
  ];
  const ratio = (a: ServeResult, b: ServeResult) =>
    `${(a.throughput / b.throughput).toFixed(2)}× throughput, ` +
    `${(a.perCpuSecond / b.perCpuSecond).toFixed(2)}× per CPU-second`;
  console.log(`bucketing vs pad to max length: ${ratio(bucketed, maxPad)} (target ≥ 1.5×)`);
  console.log(`bucketing vs pad to batch max:  ${ratio(bucketed, batchPad)}`);
  console.log(
    `largest |difference| of any output value between configurations: ${largestDifference(maxPad, bucketed).toExponential(2)}`,
  );

  for (const own of predictors.values()) await Promise.all(own.map((p) => p.close()));
  await model.dispose();
}

/** Padding must not change answers: the masked encoder gives each request the same values. */
function largestDifference(a: ServeResult, b: ServeResult): number {
  let largest = 0;
  a.outputs.forEach((x, i) => {
    const y = b.outputs[i]!;
    if (x.length !== y.length || x.hidden.length !== y.hidden.length) largest = Infinity;
    else
      for (let j = 0; j < x.hidden.length; j++)
        largest = Math.max(largest, Math.abs(x.hidden[j]! - y.hidden[j]!));
  });
  return largest;
}

await main();
