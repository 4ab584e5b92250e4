// The scheduler at its bound: rolling batching against request-level batching on a decoder
// whose step costs the same whatever it holds (a model on an accelerator with room to spare),
// and rolling's tokens/s against the most any scheduler could reach on that workload. With
// the decoder's cost flat, what remains is the scheduler's own: when it admits, how full it
// keeps the batch, what it costs between steps. See bench/README.md.
import { parseArgs } from 'node:util';
import {
  type AdmissionPolicy,
  type GenerationJob,
  type GenerationOutput,
  JobQueue,
  RollingLoop,
  SequenceStepper,
  serveQueue,
} from '@kiln/batching';
import {
  formatSpread,
  goalLine,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';
import { FlatStepDecoder } from './flat-step-decoder.js';
import { firstComeFirstServedMs, longestFirstMs, makespanBoundMs } from './makespan-bound.js';
import { RequestLevelBatcher } from './request-level.js';
import { type Generator, type RunFigures, makeWorkload, runWorkload } from './workload.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '3' },
    'gap-ms': { type: 'string', default: '15' },
    'prompt-max': { type: 'string', default: '64' },
    'output-max': { type: 'string', default: '256' },
    /** What every step costs, whatever it holds. */
    'step-ms': { type: 'string', default: '10' },
  },
});
const rounds = Number(values.rounds);
const stepMs = Number(values['step-ms']);
const decoder = new FlatStepDecoder(stepMs);
const workload = makeWorkload({
  requests: Number(values.requests),
  vocab: decoder.vocabSize,
  promptMin: 8,
  promptMax: Number(values['prompt-max']),
  outputMin: 8,
  outputMax: Number(values['output-max']),
  meanGapMs: Number(values['gap-ms']),
  seed: 7,
});
const totalTokens = workload.requests.reduce((n, r) => n + r.maxNewTokens, 0);
const boundRequests = workload.requests.map((r, i) => ({
  arrivalMs: workload.arrivalsMs[i]!,
  tokens: r.maxNewTokens,
}));
const boundMs = (maxBatch: number) => makespanBoundMs(boundRequests, maxBatch, stepMs);

/** Rolling batching as a step worker runs it, on this thread: no threads between. */
function rolling(
  maxBatchSize: number,
  admission: AdmissionPolicy,
): Generator & { close(): Promise<void> } {
  const stepper = new SequenceStepper(decoder);
  const loop = new RollingLoop(stepper, stepper.info, { maxBatchSize });
  const queue = new JobQueue<GenerationJob, GenerationOutput>();
  const served = serveQueue(loop, queue, { admission });
  return {
    generate: (job) => queue.submit(job).result,
    close: async () => {
      queue.close();
      await served;
    },
  };
}

const REQUEST_LEVEL = 'request-level (batch 8)';
// Each rolling size under both admission orders (option.rolling_batch_admission).
const ROLLING = [8, 16].flatMap((maxBatch) =>
  (['first_come', 'longest_first'] as const).map((admission) => ({
    name: `rolling (max ${maxBatch}${admission === 'longest_first' ? ', longest first' : ''})`,
    maxBatch,
    admission,
    generator: rolling(maxBatch, admission),
  })),
);
const contenders: Record<
  string,
  { generator: Generator; maxBatch: number; admission?: AdmissionPolicy }
> = {
  [REQUEST_LEVEL]: { generator: new RequestLevelBatcher(decoder, 8), maxBatch: 8 },
  ...Object.fromEntries(ROLLING.map((r) => [r.name, r])),
};
const names = Object.keys(contenders);
/** The time a policy takes at no cost of its own (see makespan-bound.ts). */
const policyMs = (admission: AdmissionPolicy, maxBatch: number) =>
  (admission === 'longest_first' ? longestFirstMs : firstComeFirstServedMs)(
    boundRequests,
    maxBatch,
    stepMs,
  );

console.log(machineLine());
console.log(
  `decoder: every step ${stepMs} ms whatever it holds (FlatStepDecoder), tokens chosen by the decoder`,
);
console.log(
  `workload: ${workload.requests.length} requests, Poisson arrivals (mean gap ${values['gap-ms']} ms), prompts 8–${values['prompt-max']} tokens, outputs 8–${values['output-max']} (${totalTokens} tokens), no end-of-sequence`,
);
for (const b of [8, 16]) {
  const ms = boundMs(b);
  const fifo = policyMs('first_come', b);
  const longest = policyMs('longest_first', b);
  console.log(
    `bound at batch ${b}: ${(ms / 1000).toFixed(2)} s from the first arrival, ${((totalTokens / ms) * 1000).toFixed(0)} tokens/s; at no cost of their own, first come, first served: ${(fifo.ms / 1000).toFixed(2)} s, ${fifo.steps} steps (${(ms / fifo.ms).toFixed(3)} of the bound); longest first: ${(longest.ms / 1000).toFixed(2)} s, ${longest.steps} steps (${(ms / longest.ms).toFixed(3)})`,
  );
}

// Warm-up: a few requests through each contender.
const warm = { requests: workload.requests.slice(0, 4), arrivalsMs: [0, 0, 0, 0] };
for (const name of names) await runWorkload(contenders[name]!.generator, warm);

interface Round {
  readonly run: RunFigures;
  readonly steps: number;
  /** tokens/s ÷ the bound's tokens/s at the contender's batch limit. */
  readonly ofBound: number;
  /** How long its steps took on average: `stepMs`, unless the machine ran late. */
  readonly meanStepMs: number;
}
const figures: Record<string, Round[]> = Object.fromEntries(names.map((n) => [n, []]));
for (let round = 0; round < rounds; round++) {
  for (const name of orderOf(names, round)) {
    const { generator, maxBatch } = contenders[name]!;
    const [steps, rows, busyMs] = [decoder.steps, decoder.rows, decoder.busyMs];
    const run = await runWorkload(generator, workload);
    const taken = decoder.steps - steps;
    const busy = decoder.busyMs - busyMs;
    const ofBound = boundMs(maxBatch) / run.wallMs;
    figures[name]!.push({ run, steps: taken, ofBound, meanStepMs: busy / taken });
    // Steps that took longer than stepMs are the machine's lateness; time outside the steps
    // is the scheduler's own (and waiting for arrivals).
    console.log(
      `round ${round + 1} ${name.padEnd(24)} ${run.tokensPerS.toFixed(0).padStart(6)} tokens/s  ${(run.wallMs / 1000).toFixed(2)} s = ${(ofBound * 100).toFixed(1)}% of its bound  ${taken} steps of ${((decoder.rows - rows) / taken).toFixed(1)}, ${(busy / taken).toFixed(2)} ms each, ${((run.wallMs - busy) / taken).toFixed(2)} ms between  TTFT p50 ${run.ttftP50Ms.toFixed(0)} ms  load ${loadAverage()}`,
    );
  }
}

const series = (name: string, pick: (r: Round) => number) => figures[name]!.map(pick);
console.log('\nmedian [min–max] over rounds');
for (const name of names) {
  console.log(
    `${name.padEnd(24)} tokens/s ${formatSpread(spreadOf(series(name, (r) => r.run.tokensPerS)), 0)}  steps ${formatSpread(spreadOf(series(name, (r) => r.steps)), 0)}  TTFT p50 ${formatSpread(spreadOf(series(name, (r) => r.run.ttftP50Ms)), 0)} ms`,
  );
}
console.log('\nratios from the same rounds');
for (const { name, admission } of ROLLING) {
  const tokensPerS = (n: string) => series(n, (r) => r.run.tokensPerS);
  // What a scheduler at the bound would make of the same rounds.
  const perfect = series(REQUEST_LEVEL, (r) => r.run.wallMs / boundMs(contenders[name]!.maxBatch));
  console.log(
    `${name} ÷ ${REQUEST_LEVEL}, tokens/s: ${formatSpread(ratioSpread(tokensPerS(name), tokensPerS(REQUEST_LEVEL)), 2)}× (at the bound: ${formatSpread(spreadOf(perfect), 2)}×)`,
  );
  console.log(
    goalLine(`${name} tokens/s ÷ the bound's`, spreadOf(series(name, (r) => r.ofBound)), {
      atLeast: 0.9,
    }),
  );
  // Below the bound by the policy (its admission order, no pausing), or by the run.
  const ownMs = policyMs(admission, contenders[name]!.maxBatch).ms;
  console.log(
    `  its tokens/s ÷ its policy's (${admission}) at no cost: ${formatSpread(spreadOf(series(name, (r) => ownMs / r.run.wallMs)), 3)}`,
  );
  // The machine's lateness aside: the bound with steps as long as this run's took.
  console.log(
    `  its tokens/s ÷ the bound's with steps as long as they took: ${formatSpread(spreadOf(series(name, (r) => makespanBoundMs(boundRequests, contenders[name]!.maxBatch, r.meanStepMs) / r.run.wallMs)), 3)}`,
  );
  // Timing aside: no scheduler takes fewer steps than the work over the batch limit, nor
  // fewer than the longest request's tokens.
  const fewestSteps = Math.max(
    Math.ceil(totalTokens / contenders[name]!.maxBatch),
    ...workload.requests.map((r) => r.maxNewTokens),
  );
  console.log(
    `  its steps ÷ the fewest any scheduler takes (${fewestSteps}): ${formatSpread(spreadOf(series(name, (r) => r.steps / fewestSteps)), 3)}`,
  );
}
const reference = figures[names[0]!]![0]!.run.outputs;
const same = names.every((n) =>
  figures[n]!.every((r) => r.run.outputs.every((o, i) => o.join() === reference[i]!.join())),
);
console.log(`every contender generated the same tokens for every request: ${same}`);
console.log(machineLine());
await Promise.all(ROLLING.map((r) => r.generator.close()));
