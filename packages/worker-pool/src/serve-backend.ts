import {
  KilnError,
  KilnErrorCode,
  type Model,
  type ServingChunkSink,
  type ServingContext,
  type ServingInput,
  type ServingOutput,
} from '@kiln/core';
import type { BatchRun, WorkerBackend } from './worker-backend.js';
import { signatureOf, type WorkerFacts } from './worker-protocol.js';
import { planThreads, type ThreadPlanRequest } from './thread-budget.js';

/**
 * A `serve` worker (Python mode): requests go to the model's serving context as the HTTP or
 * gRPC layer built them, with no translator or tensors between; its answers are the responses.
 * The context computes elsewhere (its own process); when it dies, so does this worker, and the
 * pool's group replaces it.
 */
export class ServeBackend implements WorkerBackend<ServingInput, ServingOutput> {
  readonly kind = 'inline';
  readonly computesElsewhere = true;
  private context: ServingContext | undefined;
  /** Aborted by terminate(): a context still starting is ended too. */
  private readonly starting = new AbortController();
  private readonly deathListeners: ((error: KilnError) => void)[] = [];

  constructor(
    private readonly model: Model,
    private readonly threads: Omit<ThreadPlanRequest, 'engineOptions'>,
    /** Cores for the context's own threads or process. */
    private readonly cores: readonly number[] | undefined,
  ) {}

  async start(): Promise<WorkerFacts> {
    const plan = planThreads({ ...this.threads, engineOptions: this.model.properties.options });
    const context = await this.model.newServingContext!({
      ...(plan.intraOpThreads === undefined ? {} : { intraOpThreads: plan.intraOpThreads }),
      ...(this.cores ? { cpuCores: this.cores } : {}),
      signal: this.starting.signal,
    });
    this.context = context;
    context.onDeath((error) => this.deathListeners.forEach((listener) => listener(error)));
    const pinned = context.pinnedCores;
    return {
      threadId: undefined,
      intraOpThreads: plan.intraOpThreads,
      threadSource: plan.source,
      pinning: pinned
        ? { pinned: true, cores: pinned }
        : this.cores
          ? { pinned: false, reason: `the ${this.model.engine} engine does not pin its threads` }
          : undefined,
      priority: undefined,
      engine: this.model.engine,
      model: this.model.describe(),
      signature: signatureOf(this.model),
    };
  }

  async run(
    inputs: readonly ServingInput[],
    signal: AbortSignal,
    onChunk?: readonly (ServingChunkSink | undefined)[],
  ): Promise<BatchRun<ServingOutput>> {
    if (!this.context)
      throw new KilnError(KilnErrorCode.Internal, 'serve worker ran before it started');
    const started = performance.now();
    // A handler's streamed answer goes to its request's sink as it comes.
    const results = await this.context.serve(inputs, onChunk ? { signal, onChunk } : { signal });
    // The whole call is the model's time: requests are neither encoded nor decoded here.
    const inferenceMs = performance.now() - started;
    const timings = {
      batchSize: inputs.length,
      forwards: 1,
      preprocessMs: 0,
      inferenceMs,
      postprocessMs: 0,
    };
    return { results, timings };
  }

  endProfiling(): Promise<unknown> {
    return Promise.reject(
      new KilnError(KilnErrorCode.InvalidInput, `${this.model.engine} workers keep no profile`),
    );
  }

  onDeath(listener: (error: KilnError) => void): void {
    this.deathListeners.push(listener);
  }

  async stop(): Promise<void> {
    await this.context?.close();
  }

  terminate(): Promise<void> {
    this.starting.abort();
    return this.stop();
  }
}

/** A `serve` model's settings: its workers have the model's own start timeout (its loading's). */
export function serveSettings<S extends { readonly startTimeoutMs: number }>(
  settings: S,
  model: Model,
): S {
  const ms = model.newServingContext ? model.contextStartTimeoutMs : undefined;
  return ms === undefined ? settings : { ...settings, startTimeoutMs: ms };
}
