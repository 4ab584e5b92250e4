import {
  type ExecutionContext,
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type NDList,
} from '@kiln/core';
import type {
  ContextWrap,
  ForwardResult,
  ForwardSettings,
  NativeValue,
} from '@kiln/libtorch-native';
import { flattenOutputs, forwardArguments } from './forward-binding.js';
import { native } from './native.js';
import type { PtModel } from './pt-model.js';

/** Options of PtExecutionContext.forwardValues. */
export interface ForwardValuesOptions {
  /**
   * Keep output tensors in LibTorch as TensorWraps (on the GPU for CUDA models) for the next
   * step to consume, instead of copying them into JavaScript memory.
   */
  keepOnDevice?: boolean;
  /** Record every LibTorch operator with its time (a per-operator profile). */
  recordOps?: boolean;
  /** Return the graph the TorchScript executor ran. */
  captureGraph?: boolean;
  signal?: AbortSignal;
}

/**
 * One execution context of a PtModel: at most one forward in flight. Every context of a model
 * runs on the model's one loaded module (weights are held once); each has a native thread of
 * its own, so forwards of different contexts run concurrently, each with the model's
 * thread-local settings applied on the thread that runs it.
 */
export class PtExecutionContext implements ExecutionContext {
  private busy = false;
  private closed = false;
  private readonly settings: ForwardSettings;

  constructor(
    private readonly model: PtModel,
    private readonly native: ContextWrap,
    intraOpThreads: number | undefined,
    /**
     * Cores its forward thread and intra-op threads run on (core pinning), one thread each,
     * put in force by the addon on the context's thread before its first forward.
     */
    readonly pinnedCores: readonly number[] | undefined = undefined,
  ) {
    const s = model.settings;
    this.settings = {
      graphOptimizer: s.graphOptimizer,
      numThreads: intraOpThreads ?? s.numThreads,
      mkldnn: s.useMkldnn,
      cudnn: s.useCudnn,
      cudnnBenchmark: s.cudnnBenchmark,
      ...(pinnedCores?.length ? { cpuAffinity: pinnedCores } : {}),
    };
  }

  /** Settings put in force on the forward's thread each time. */
  get forwardSettings(): Readonly<ForwardSettings> {
    return this.settings;
  }

  async forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    return this.exclusive(options.signal, async () => {
      const args = forwardArguments(
        input,
        this.model.forwardArguments,
        this.model.declaredSignature?.inputs,
      );
      const result = await native(() => this.native.forward(args, this.settings));
      return flattenOutputs(
        result.value,
        this.model.outputs.length > 0 ? this.model.outputs : undefined,
      );
    });
  }

  /**
   * Runs forward on TorchScript values as they are (tensors, TensorWraps, arrays for tuples and
   * lists, objects for dicts) and returns its result unflattened, with what was in force on the
   * forward's thread.
   */
  async forwardValues(
    args: readonly NativeValue[],
    options: ForwardValuesOptions = {},
  ): Promise<ForwardResult> {
    return this.exclusive(options.signal, () =>
      native(() =>
        this.native.forward(args, {
          ...this.settings,
          nativeOutputs: options.keepOnDevice ?? false,
          recordOps: options.recordOps ?? false,
          captureGraph: options.captureGraph ?? false,
        }),
      ),
    );
  }

  /** Releases the context's thread once a running forward is done. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.native.dispose();
    this.model.contextClosed(this);
  }

  private async exclusive<T>(signal: AbortSignal | undefined, run: () => Promise<T>): Promise<T> {
    if (this.closed || this.model.disposed)
      throw new KilnError(KilnErrorCode.Closed, 'execution context is closed');
    if (this.busy) {
      throw new KilnError(
        KilnErrorCode.PredictorBusy,
        'execution context already has a forward in flight',
      );
    }
    if (signal?.aborted)
      throw new KilnError(KilnErrorCode.Cancelled, 'forward was cancelled before it started');
    this.busy = true;
    try {
      return await run();
    } finally {
      this.busy = false;
    }
  }
}
