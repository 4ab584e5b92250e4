import { performance } from 'node:perf_hooks';
import {
  type Model,
  NDList,
  type Predictor,
  type ServingInput,
  type ServingOutput,
  Tensor,
  isNumericDType,
} from '@kiln/core';
import { hasBatchAxis } from './batch-axis.js';

/** How long a full batch of the model takes, timed where the worker runs. */
export type ForwardProbe =
  | {
      readonly batch: number;
      /**
       * Fastest of the timed runs of `batch` one-row requests, µs: what the model costs when
       * it has a core (other work on a shared machine slows some runs, not all).
       */
      readonly bestUs: number;
      /** Median of the timed runs, µs. */
      readonly medianUs: number;
    }
  | { readonly skipped: string };

export interface ForwardProbeRequest {
  /** The pool's batch size, and its adaptive one (used when the model has a batch axis). */
  readonly batchSize: number;
  readonly autoBatchSize: number | undefined;
  /** The inline limit: a model far slower than this at batch 1 is not timed further. */
  readonly limitUs: number;
}

const TIMED_RUNS = 5;
/** Cold runs this many times the limit end the probe: a large model. */
const COLD_SLACK = 100;
/** Past the shortest warm-up, runs this many times the limit end it: no warming gets there. */
const HOPELESS_SLACK = 8;
/** After the warm-up, a batch-1 run this many times the limit ends it too. */
const WARM_SLACK = 4;
/**
 * Batch-1 runs warm the code up before timing: a new thread runs WebAssembly and hot
 * JavaScript unoptimised at first (tfjs's wasm backend reaches full speed only after ~0.5–1 s
 * of runs). The warm-up lasts until the fastest run has not improved by 5 % for
 * WARM_UP_STABLE_MS, between WARM_UP_MIN_MS and WARM_UP_MAX_MS.
 */
const WARM_UP_MIN_MS = 200;
const WARM_UP_MAX_MS = 1500;
const WARM_UP_STABLE_MS = 200;

/**
 * Times the model on zero tensors shaped as its inputs declare, `batch` one-row requests per
 * run, through the worker's own Predictor (what one inline run would block the event loop
 * for). Batch-1 runs come first and warm the code up: a model far slower than `limitUs`
 * there ends the probe, so a large model pays one extra forward at start, a model of a few
 * milliseconds 200 ms of runs, a small one until its speed settles (at most 1.5 s).
 */
export async function probeForward(
  model: Model,
  predictor: Predictor<ServingInput, ServingOutput>,
  options: ForwardProbeRequest,
): Promise<ForwardProbe> {
  try {
    return await timeBatches(model, predictor, options);
  } catch (error) {
    return {
      skipped: `the probe failed: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}

async function timeBatches(
  model: Model,
  predictor: Predictor<ServingInput, ServingOutput>,
  options: ForwardProbeRequest,
): Promise<ForwardProbe> {
  const batch =
    options.autoBatchSize !== undefined && hasBatchAxis(model.inputs)
      ? options.autoBatchSize
      : options.batchSize;
  const request = oneRowRequest(model);
  if (typeof request === 'string') return { skipped: request };
  const run = async (size: number): Promise<number> => {
    const inputs = Array.from({ length: size }, () => request);
    const start = performance.now();
    const results = await predictor.batchPredictSettled(inputs);
    const failed = results.find((r) => !r.ok);
    if (failed && !failed.ok) throw failed.error;
    return (performance.now() - start) * 1000;
  };
  const slow = (us: number) => ({ batch: 1, bestUs: Math.round(us), medianUs: Math.round(us) });
  const cold = await run(1);
  if (cold > options.limitUs * COLD_SLACK) return slow(cold);
  let best = Infinity;
  const started = performance.now();
  let improvedAt = started;
  for (;;) {
    const us = await run(1);
    const now = performance.now();
    if (us < best * 0.95) improvedAt = now;
    best = Math.min(best, us);
    if (best > options.limitUs * COLD_SLACK) return slow(best);
    const elapsed = now - started;
    if (elapsed >= WARM_UP_MAX_MS) break;
    if (elapsed < WARM_UP_MIN_MS) continue;
    if (best > options.limitUs * HOPELESS_SLACK) return slow(best);
    if (now - improvedAt >= WARM_UP_STABLE_MS) break;
  }
  if (best > options.limitUs * WARM_SLACK) return slow(best);
  await run(batch); // warm-up at the full batch
  const times: number[] = [];
  for (let i = 0; i < TIMED_RUNS; i++) times.push(await run(batch));
  times.sort((a, b) => a - b);
  return {
    batch,
    bestUs: Math.round(times[0]!),
    medianUs: Math.round(times[TIMED_RUNS >> 1]!),
  };
}

/** Raw tensors for one request of one row, or why the model's inputs do not allow one. */
function oneRowRequest(model: Model): ServingInput | string {
  if (model.inputs.length === 0) return 'the model declares no inputs';
  const tensors = [];
  for (const input of model.inputs) {
    const { dtype, shape } = input;
    if (dtype === undefined || shape === undefined || shape.length === 0)
      return `input ${input.name} declares no dtype or shape`;
    if (!isNumericDType(dtype)) return `input ${input.name} is ${dtype}`;
    if (shape.slice(1).some((d) => d < 0)) return `input ${input.name} has free dimensions`;
    const rows = shape[0]! > 0 ? shape[0]! : 1;
    tensors.push(Tensor.zeros(dtype, [rows, ...shape.slice(1)], input.name));
  }
  return { tensors: new NDList(tensors), rawTensors: true };
}
