import {
  type ExecutionContext,
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type NDList,
} from '@kiln/core';
import type { OrtProfile } from './profiling/ort-profile.js';
import type { RunTiming, SessionRunner } from './session-runner.js';
import type { WeightSharing } from './shared-weights.js';

/**
 * One OnnxRuntime session used as a Kiln execution context. Forwards run on the calling
 * thread and block it while ONNX Runtime computes; the caller (a Predictor, one per worker)
 * keeps one forward in flight.
 */
export class OrtExecutionContext implements ExecutionContext {
  private closing: Promise<void> | undefined;
  private runs = 0;
  private timing: RunTiming | undefined;

  constructor(
    private readonly session: SessionRunner,
    /** Called once the session is closed, so its model stops counting this context. */
    private readonly onClose: (context: OrtExecutionContext) => void = () => undefined,
    /** Cores its intra-op threads were placed on, one each. */
    readonly pinnedCores: readonly number[] | undefined = undefined,
  ) {}

  get inputs() {
    return this.session.inputs;
  }

  get outputs() {
    return this.session.outputs;
  }

  /** Where this context's session reads its weights from (see WeightSharing). */
  get weights(): WeightSharing {
    return this.session.weightSharing;
  }

  /** Forward calls completed so far. */
  get completedRuns(): number {
    return this.runs;
  }

  /**
   * When ONNX Runtime ran the last completed forward: a forward's wall time less `runMs` is
   * what binding inputs and reading outputs cost.
   */
  get lastRun(): RunTiming | undefined {
    return this.timing;
  }

  async forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    if (this.closing) throw new KilnError(KilnErrorCode.Closed, 'the execution context is closed');
    if (options.signal?.aborted) throw cancelled(options.signal);
    const { output, timing } = await this.session.run(input);
    this.runs++;
    this.timing = timing;
    return output;
  }

  /**
   * Ends the per-node profile of this context (its model must be loaded with
   * option.profiling=true) and returns its tables, leaving out the first `skipRuns` runs.
   */
  endProfiling(options: { skipRuns?: number } = {}): Promise<OrtProfile> {
    if (this.closing)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'the execution context is closed'));
    return this.session.endProfiling(options);
  }

  close(): Promise<void> {
    this.closing ??= this.session.close().finally(() => this.onClose(this));
    return this.closing;
  }
}

function cancelled(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  return reason instanceof KilnError
    ? reason
    : new KilnError(KilnErrorCode.Cancelled, 'the forward was cancelled before it started');
}
