import { performance } from 'node:perf_hooks';
import {
  KilnError,
  KilnErrorCode,
  NDList,
  type PredictResult,
  Tensor,
  type TensorDescriptor,
  isNumericDType,
  shapeSize,
} from '@kiln/core';
import { hasBatchAxis } from './batch-axis.js';

/** What a worker warms its model up with before it reports ready. */
export interface WarmupRequest {
  /**
   * `warmup_batch_sizes`: the batch sizes run, in order; empty turns warm-up off. Undefined:
   * 1 and the batch size the pool will run (its adaptive one for a model with a batch axis).
   */
  readonly batchSizes: readonly number[] | undefined;
  /** `warmup_shape`: one request's input shapes (see parseWarmupShape); else the declared ones. */
  readonly shape: string | undefined;
  readonly batchSize: number;
  readonly autoBatchSize: number | undefined;
}

/**
 * What a worker's warm-up did: the sizes it ran (and why it left out a default size), or why it
 * ran none.
 */
export type WarmupReport =
  | { readonly batchSizes: readonly number[]; readonly ms: number; readonly leftOut?: string }
  | { readonly skipped: string };

/**
 * How long the default warm-up's larger batch may be expected to take. Warming a model up at
 * its full batch holds READY back for as long as that batch runs, and leaves the engine's
 * arena at that batch's size in every worker: ResNet-18 at 32 on a 2-core machine took 2 s of
 * start and ~160 MiB a worker. A model that costs that much warms up at 1; sizes asked for by
 * `warmup_batch_sizes` always run. Where the first run at batch 1 does not settle it, batches of
 * 1 and 2 rows are timed to tell (see expectedBatchMs).
 */
export const DEFAULT_WARMUP_BUDGET_MS = 250;

/** Largest warm-up request: a configuration typo must not allocate without bound. */
const MAX_WARMUP_ELEMENTS = 1 << 26;

/**
 * Runs the model at each warm-up batch size, that many one-request copies of zeros shaped as
 * its inputs, as one batch of the worker (engines build kernels, allocate arenas and compile
 * graphs on their first run of a shape; the first requests should not pay for that). Inputs
 * that cannot be made (strings, undeclared shapes) and a run that fails skip the rest, with
 * the reason: warm-up never fails a load. Undefined when no warm-up is asked for.
 */
export async function warmUp(
  inputs: readonly TensorDescriptor[],
  runBatch: (batch: readonly NDList[]) => Promise<readonly PredictResult<unknown>[]>,
  request: WarmupRequest,
  /** The clock runs are timed by (tests give their own). */
  now: () => number = () => performance.now(),
): Promise<WarmupReport | undefined> {
  const sizes = warmupBatchSizes(inputs, request);
  if (sizes.length === 0) return undefined;
  try {
    warmupInput(inputs, request.shape);
  } catch (error) {
    return { skipped: error instanceof Error ? error.message : String(error) };
  }
  const started = now();
  const ran: number[] = [];
  let leftOut: string | undefined;
  // Runs one batch of `size` zero requests: its time, or why it failed.
  const run = async (size: number): Promise<number | string> => {
    // Fresh tensors per request: a thread worker may take their buffers.
    const batch = Array.from({ length: size }, () => warmupInput(inputs, request.shape));
    const runStarted = now();
    const failed = (await runBatch(batch)).find((r) => !r.ok);
    if (failed && !failed.ok)
      return `its run at batch size ${size} failed: ${failed.error.message}`;
    return now() - runStarted;
  };
  let firstMs = 0;
  for (const [i, size] of sizes.entries()) {
    if (!request.batchSizes && i > 0) {
      const expectedMs = await expectedBatchMs(size, firstMs, run);
      if (typeof expectedMs === 'string') return { skipped: expectedMs };
      if (expectedMs > DEFAULT_WARMUP_BUDGET_MS) {
        leftOut = `batch size ${size} would take about ${Math.round(expectedMs)} ms (set warmup_batch_sizes to run it)`;
        break;
      }
    }
    const ms = await run(size);
    if (typeof ms === 'string') return { skipped: ms };
    if (i === 0) firstMs = ms;
    ran.push(size);
  }
  return {
    batchSizes: ran,
    ms: Math.round(now() - started),
    ...(leftOut ? { leftOut } : {}),
  };
}

/**
 * How long the default's batch of `size` rows should take (see DEFAULT_WARMUP_BUDGET_MS), from
 * the first run's time (one row, cold: an upper bound on a row) where that settles it either
 * way, else from batches of 1 and 2 rows timed warm: a batch's fixed cost and each row's.
 */
async function expectedBatchMs(
  size: number,
  firstMs: number,
  run: (size: number) => Promise<number | string>,
): Promise<number | string> {
  const bound = firstMs * size;
  if (bound <= DEFAULT_WARMUP_BUDGET_MS || bound > 4 * DEFAULT_WARMUP_BUDGET_MS) return bound;
  const one = await run(1);
  if (typeof one === 'string') return one;
  const two = await run(2);
  if (typeof two === 'string') return two;
  return one + Math.max(0, two - one) * (size - 1);
}

/** The sizes a worker runs: those asked for, else 1 and the pool's batch size. */
export function warmupBatchSizes(
  inputs: readonly TensorDescriptor[],
  request: WarmupRequest,
): number[] {
  if (request.batchSizes) return [...request.batchSizes];
  const batch =
    request.autoBatchSize !== undefined && hasBatchAxis(inputs)
      ? request.autoBatchSize
      : request.batchSize;
  return batch === 1 ? [1] : [1, batch];
}

/** One request of zeros: `warmup_shape`'s shapes, or the declared ones with free dims at 1. */
function warmupInput(inputs: readonly TensorDescriptor[], shapeText: string | undefined): NDList {
  if (inputs.length === 0) return fail('the model declares no inputs');
  const given = shapeText === undefined ? undefined : parseWarmupShape(shapeText);
  if (given && given.length !== inputs.length) {
    return fail(
      `warmup_shape gives ${given.length} input shape(s); the model takes ${inputs.length}`,
    );
  }
  const tensors = inputs.map((input, i) => {
    const { dtype, shape } = input;
    if (dtype === undefined) return fail(`input ${input.name} declares no dtype`);
    if (!isNumericDType(dtype)) return fail(`input ${input.name} is ${dtype}`);
    const wanted = given?.[i];
    if (wanted && shape && !fits(wanted, shape))
      return fail(
        `warmup_shape ${wanted.join(',')} does not fit input ${input.name} [${shape.join(',')}]`,
      );
    if (!wanted && shape === undefined)
      return fail(`input ${input.name} declares no shape (set warmup_shape)`);
    const dims = wanted ?? shape!.map((d) => (d < 0 ? 1 : d));
    return Tensor.zeros(dtype, dims, input.name);
  });
  return new NDList(tensors);
}

function fits(shape: readonly number[], declared: readonly number[]): boolean {
  return (
    shape.length === declared.length && shape.every((d, i) => declared[i]! < 0 || declared[i] === d)
  );
}

function fail(reason: string): never {
  throw new Error(reason);
}

/**
 * `warmup_shape`: one request's input shapes, inputs in declared order split by `|`, dims by
 * `,` — `1,3,224,224`, or `1,128|1,128` for two inputs (the first dimension is the request's
 * rows, as requests are sent). A malformed one is INVALID_CONFIG.
 */
export function parseWarmupShape(text: string): number[][] {
  return text.split('|').map((part) => {
    const dims = part.split(',').map((d) => Number(d.trim()));
    if (
      part.trim() === '' ||
      dims.some((d) => !Number.isSafeInteger(d) || d < 1) ||
      shapeSize(dims) > MAX_WARMUP_ELEMENTS
    ) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `warmup_shape ${JSON.stringify(text)}: ${JSON.stringify(part.trim())} is not a shape of positive dims (at most ${MAX_WARMUP_ELEMENTS} elements)`,
      );
    }
    return dims;
  });
}

/**
 * `warmup_batch_sizes`: comma-separated batch sizes ≥ 1, run in that order, or `none` (no
 * warm-up). A bad one is INVALID_CONFIG naming `key`.
 */
export function parseWarmupBatchSizes(text: string, key = 'warmup_batch_sizes'): number[] {
  const trimmed = text.trim();
  if (trimmed.toLowerCase() === 'none') return [];
  const sizes = trimmed.split(',').map((part) => part.trim());
  for (const size of sizes) {
    if (!/^\d+$/.test(size) || Number(size) < 1 || Number(size) > 1 << 20) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${key}=${text.trim()}: ${JSON.stringify(size)} is not a batch size (integers ≥ 1, comma-separated, or none)`,
      );
    }
  }
  // Repeats are kept: LibTorch's graph executor optimizes a shape on its second run (1,1,8,8).
  return sizes.map(Number);
}
