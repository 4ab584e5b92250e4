import type { NDList, ServingInput } from '@kiln/core';
import type { BatchRun, WorkerBackend } from './worker-backend.js';
import type { WorkerFacts } from './worker-protocol.js';
import { type WarmupRequest, warmUp } from './warm-up.js';

/** How a pool's workers warm up: the sizes and shapes, and how tensors become an input. */
export interface WarmupPlan<I> {
  readonly request: WarmupRequest;
  readonly input: (tensors: NDList) => I;
}

/** Serving pools feed warm-up tensors as raw tensors, past the translator's decoding. */
export function servingWarmup(request: WarmupRequest): WarmupPlan<ServingInput> {
  return { request, input: (tensors) => ({ tensors, rawTensors: true }) };
}

/**
 * A worker backend that warms its model up once started, before the worker reports ready
 * (and so before its pool, and the model, are): the batch sizes of the plan run through the
 * backend itself, on the worker's own thread, context or process. The result is among the
 * worker's facts (`warmup`).
 */
export function withWarmup<I, O>(
  backend: WorkerBackend<I, O>,
  plan: WarmupPlan<I>,
): WorkerBackend<I, O> {
  return {
    kind: backend.kind,
    ...(backend.computesElsewhere === undefined
      ? {}
      : { computesElsewhere: backend.computesElsewhere }),
    async start(): Promise<WorkerFacts> {
      const facts = await backend.start();
      const signal = new AbortController().signal;
      const warmup = await warmUp(
        facts.signature.inputs,
        async (batch) => (await backend.run(batch.map(plan.input), signal)).results,
        plan.request,
      );
      return warmup ? { ...facts, warmup } : facts;
    },
    run: (inputs, signal, onChunk): Promise<BatchRun<O>> => backend.run(inputs, signal, onChunk),
    endProfiling: (options) => backend.endProfiling(options),
    onDeath: (listener) => backend.onDeath(listener),
    stop: () => backend.stop(),
    terminate: () => backend.terminate(),
  };
}
