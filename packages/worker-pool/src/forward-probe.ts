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
      /** Median wall time of one run of `batch` one-row requests, µs. */
      readonly medianUs: number;
    }
  | { readonly skipped: string };

const TIMED_RUNS = 5;
/** How far over the limit a batch-1 run may be (cold, then warm) before timing stops. */
const COLD_SLACK = 40;
const WARM_SLACK = 4;

export interface ForwardProbeRequest {
  /** The pool's batch size, and its adaptive one (used when the model has a batch axis). */
  readonly batchSize: number;
  readonly autoBatchSize: number | undefined;
  /** The inline limit: a model far slower than this at batch 1 is not timed further. */
  readonly limitUs: number;
}

/**
 * Times the model on zero tensors shaped as its inputs declare, `batch` one-row requests per
 * run, through the worker's own Predictor (what one inline run would block the event loop
 * for). Runs at batch 1 come first: a model far slower than `limitUs` there stops the probe,
 * so a large model pays one or two warm-up forwards.
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
  const run = async (batch: number): Promise<number | string> => {
    const inputs = Array.from({ length: batch }, () => request);
    const start = performance.now();
    const results = await predictor.batchPredictSettled(inputs);
    const failed = results.find((r) => !r.ok);
    if (failed && !failed.ok) return `the probe run failed: ${failed.error.message}`;
    return (performance.now() - start) * 1000;
  };
  // A first run is cold (allocations, lazy initialisation): only a far slower one ends here.
  for (const slack of [COLD_SLACK, WARM_SLACK]) {
    const us = await run(1);
    if (typeof us === 'string') return { skipped: us };
    if (us > options.limitUs * slack) return { batch: 1, medianUs: Math.round(us) };
  }
  const times: number[] = [];
  await run(batch); // warm-up at the full batch
  for (let i = 0; i < TIMED_RUNS; i++) {
    const us = await run(batch);
    if (typeof us === 'string') return { skipped: us };
    times.push(us);
  }
  times.sort((a, b) => a - b);
  return { batch, medianUs: Math.round(times[TIMED_RUNS >> 1]!) };
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
