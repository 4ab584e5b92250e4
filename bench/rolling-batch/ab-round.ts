// One round of ab-old-build.ts in a process of its own: the rolling batching of the Kiln build
// at --build (a checkout, built and installed) runs the workload in --workload on --model,
// and prints one `ROUND {json}` line. The build's own packages are imported from its folder,
// so the same file drives the current tree and an older one; the client (arrivals, timing)
// is this tree's runWorkload in both.
//   node -C @kiln/source --import tsx bench/rolling-batch/ab-round.ts --build DIR --model DIR --workload FILE
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { GenerationJob } from '@kiln/batching';
import {
  type BenchWorkload,
  type Generator,
  type GenerationFigures,
  runWorkload,
} from './workload.js';

const { values } = parseArgs({
  options: {
    build: { type: 'string' },
    model: { type: 'string' },
    workload: { type: 'string' },
    'max-batch': { type: 'string', default: '16' },
    threads: { type: 'string', default: '1' },
  },
});
if (!values.build || !values.model || !values.workload)
  throw new Error('ab-round needs --build, --model and --workload');
const build = resolve(values.build);
const modelDir = resolve(values.model);
const maxBatchSize = Number(values['max-batch']);
const threads = Number(values.threads);

/** What each build's rolling path reports of one run's steps. */
interface StepSums {
  steps: number;
  rows: number;
  /** On the decoding thread: its whole steps. */
  threadMs: number;
  /** As the rolling loop on the main thread saw them: threadMs plus messages between threads. */
  tripMs: number;
}

interface RollingPath {
  readonly description: string;
  readonly generator: Generator;
  /** The step sums since the last call, and zero for the next run. */
  take(): StepSums;
  close(): Promise<void>;
}

/** A build's module, by its path in the build (its packages resolve their imports there). */
async function buildModule<T>(...path: string[]): Promise<T> {
  return (await import(pathToFileURL(join(build, ...path)).href)) as T;
}

interface StepReport {
  readonly sequences: number;
  readonly ms: number;
  readonly hostMs: number;
}
interface WorkerPoolModule {
  /** Builds since the step workers: a generation pool, as the server serves generation. */
  createGenerationPool?: (options: unknown) => Promise<{
    predict(job: GenerationJob): Promise<GenerationFigures>;
    onStep(listener: (step: StepReport) => void): () => void;
    shutdown(): Promise<void>;
  }>;
  startInferenceThread: unknown;
}

/** The generation pool the server runs: one step worker, its rolling loop fed from the queue. */
async function poolPath(pools: WorkerPoolModule): Promise<RollingPath> {
  const pool = await pools.createGenerationPool!({
    model: {
      url: modelDir,
      engines: ['@kiln/engine-onnxruntime'],
      overrides: {
        'option.rolling_batch': 'auto',
        'option.max_rolling_batch_size': String(maxBatchSize),
        'option.intraOpNumThreads': String(threads),
      },
    },
    settings: { minWorkers: 1, maxWorkers: 1 },
  });
  let sums = emptySums();
  pool.onStep((step) => {
    sums.steps++;
    sums.rows += step.sequences;
    sums.threadMs += step.hostMs;
    // A step taken ahead may come back sooner than its own compute took: no crossing cost.
    sums.tripMs += Math.max(step.ms, step.hostMs);
  });
  return {
    description: 'generation pool: a step worker (decoder, sampler on its thread; token ids cross)',
    generator: { generate: (job) => pool.predict(job) },
    take: () => {
      const taken = sums;
      sums = emptySums();
      return taken;
    },
    close: () => pool.shutdown(),
  };
}

interface OldStepCounter {
  take(): { steps: number; rows: number; threadMs: number; tripMs: number };
}
/**
 * Builds before the step workers (e8bcdc3): the server's GenerativeModel drove a
 * RollingScheduler on the main thread over an OrtStepDecoder on an inference thread (logits
 * cross each step); the build's own bench StepCounter sums its steps.
 */
async function schedulerPath(pools: WorkerPoolModule): Promise<RollingPath> {
  const { RollingScheduler } = await buildModule<{
    RollingScheduler: new (decoder: unknown, options: { maxBatchSize: number }) => Generator;
  }>('packages', 'batching', 'src', 'index.ts');
  const { OrtStepDecoder } = await buildModule<{
    OrtStepDecoder: { load(dir: string, options: unknown): Promise<{ close(): Promise<void> }> };
  }>('packages', 'engine-onnxruntime', 'src', 'index.ts');
  const { StepCounter } = await buildModule<{
    StepCounter: new (decoder: unknown) => OldStepCounter;
  }>('bench', 'rolling-batch', 'step-counter.ts');
  const decoder = await OrtStepDecoder.load(modelDir, {
    startThread: pools.startInferenceThread,
    session: { intraOpNumThreads: threads },
  });
  const counter = new StepCounter(decoder);
  return {
    description:
      'RollingScheduler on the main thread over an OrtStepDecoder thread (logits cross each step)',
    generator: new RollingScheduler(counter, { maxBatchSize }),
    take: () => counter.take(),
    close: () => decoder.close(),
  };
}

function emptySums(): StepSums {
  return { steps: 0, rows: 0, threadMs: 0, tripMs: 0 };
}

const workload = JSON.parse(await readFile(values.workload, 'utf8')) as BenchWorkload;
const pools = await buildModule<WorkerPoolModule>('packages', 'worker-pool', 'src', 'index.ts');
const path = pools.createGenerationPool ? await poolPath(pools) : await schedulerPath(pools);

// Warm-up: a few requests at once, as run.ts does.
const n = Math.min(4, workload.requests.length);
await runWorkload(path.generator, {
  requests: workload.requests.slice(0, n),
  arrivalsMs: new Array<number>(n).fill(0),
});
path.take();

const run = await runWorkload(path.generator, workload);
const steps = path.take();
await path.close();
console.log(
  `ROUND ${JSON.stringify({
    path: path.description,
    tokens: run.tokens,
    wallMs: run.wallMs,
    tokensPerS: run.tokensPerS,
    ttftP50Ms: run.ttftP50Ms,
    interTokenP99Ms: run.interTokenP99Ms,
    steps: steps.steps,
    meanBatch: steps.rows / steps.steps,
    messagesMsPerStep: (steps.tripMs - steps.threadMs) / steps.steps,
    outputsDigest: createHash('sha256').update(JSON.stringify(run.outputs)).digest('hex'),
  })}`,
);
