import { signatureOf } from './worker-protocol.js';
import {
  KilnError,
  KilnErrorCode,
  type Model,
  Predictor,
  type PredictTimings,
  type Translator,
} from '@kiln/core';
import type { BatchRun, WorkerBackend } from './worker-backend.js';
import type { WorkerFacts } from './worker-protocol.js';
import { planThreads, type ThreadPlanRequest } from './thread-budget.js';

/**
 * A worker on the main thread: its own Predictor (execution context) over a model loaded
 * once and shared. For engines whose forward already runs off the JS thread (LibTorch's
 * async workers), where one copy of the weights serves every worker.
 */
export class InlineBackend<I, O> implements WorkerBackend<I, O> {
  readonly kind = 'inline';
  private predictor: Predictor<I, O> | undefined;
  private timings: PredictTimings | undefined;

  constructor(
    private readonly model: Model,
    private readonly translator: Translator<I, O>,
    private readonly threads: Omit<ThreadPlanRequest, 'engineOptions'>,
    /** The engine's forward runs off this thread (its provider's `execution: 'async'`). */
    readonly computesElsewhere = false,
    /** Cores for the engine's own threads (LibTorch's forward thread, a Python process). */
    private readonly cores: readonly number[] | undefined = undefined,
  ) {}

  async start(): Promise<WorkerFacts> {
    const plan = planThreads({ ...this.threads, engineOptions: this.model.properties.options });
    this.predictor = await Predictor.create(this.model, this.translator, {
      ...(plan.intraOpThreads === undefined ? {} : { intraOpThreads: plan.intraOpThreads }),
      ...(this.cores ? { cpuCores: this.cores } : {}),
      onTimings: (timings) => (this.timings = timings),
    });
    const pinned = this.predictor.pinnedCores;
    return {
      threadId: undefined,
      intraOpThreads: plan.intraOpThreads,
      threadSource: plan.source,
      pinning: pinned
        ? { pinned: true, cores: pinned }
        : this.cores
          ? { pinned: false, reason: `the ${this.model.engine} engine does not pin its threads` }
          : this.computesElsewhere
            ? undefined
            : { pinned: false, reason: 'inline workers share the main thread' },
      priority: undefined,
      engine: this.model.engine,
      model: this.model.describe(),
      signature: signatureOf(this.model),
    };
  }

  async run(inputs: readonly I[], signal: AbortSignal): Promise<BatchRun<O>> {
    if (!this.predictor)
      throw new KilnError(KilnErrorCode.Internal, 'inline worker ran before it started');
    this.timings = undefined;
    const results = await this.predictor.batchPredictSettled(inputs, { signal });
    return { results, timings: this.timings };
  }

  endProfiling(options: { skipRuns?: number }): Promise<unknown> {
    if (!this.predictor)
      return Promise.reject(new KilnError(KilnErrorCode.Internal, 'inline worker is not started'));
    return this.predictor.endProfiling(options);
  }

  onDeath(): void {
    // A main-thread worker cannot die apart from the process; fatal errors surface from run().
  }

  async stop(): Promise<void> {
    await this.predictor?.close();
  }

  terminate(): Promise<void> {
    return this.stop();
  }
}
