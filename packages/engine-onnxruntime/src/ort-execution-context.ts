import {
  type ExecutionContext,
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type NDList,
} from '@kiln/core';
import type { OrtProfile } from './profiling/ort-profile.js';
import type { RunTiming, SessionHost } from './session-host.js';

/** Where a context's session runs: its own worker thread, or the thread that created it. */
export type SessionThread = 'worker' | 'calling';

/**
 * One OnnxRuntime session used as a Kiln execution context: forwards run one at a time (a
 * second call waits for the first), and close() waits for the running one.
 */
export class OrtExecutionContext implements ExecutionContext {
  private tail: Promise<unknown> = Promise.resolve();
  private closing: Promise<void> | undefined;
  private runs = 0;
  private timing: RunTiming | undefined;

  constructor(
    private readonly host: SessionHost,
    readonly thread: SessionThread,
    /** Called once the session is closed, so its model stops counting this context. */
    private readonly onClose: (context: OrtExecutionContext) => void = () => undefined,
  ) {}

  get inputs() {
    return this.host.inputs;
  }

  get outputs() {
    return this.host.outputs;
  }

  /** Forward calls completed so far. */
  get completedRuns(): number {
    return this.runs;
  }

  /**
   * When ONNX Runtime ran the last completed forward, timed on the session's own thread: a
   * forward's wall time less `runMs` is what the thread hop and copies cost.
   */
  get lastRun(): RunTiming | undefined {
    return this.timing;
  }

  forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    return this.serialize(async () => {
      if (options.signal?.aborted) throw cancelled(options.signal);
      const { output, timing } = await this.host.run(input);
      this.runs++;
      this.timing = timing;
      return output;
    });
  }

  /**
   * Ends the per-node profile of this context (its model must be loaded with
   * option.profiling=true) and returns its tables, leaving out the first `skipRuns` runs.
   */
  endProfiling(options: { skipRuns?: number } = {}): Promise<OrtProfile> {
    return this.serialize(() => this.host.endProfiling(options));
  }

  close(): Promise<void> {
    this.closing ??= this.tail.then(() => this.host.close()).finally(() => this.onClose(this));
    return this.closing;
  }

  private serialize<T>(task: () => Promise<T>): Promise<T> {
    if (this.closing)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'the execution context is closed'));
    const next = this.tail.then(task);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

function cancelled(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  return reason instanceof KilnError
    ? reason
    : new KilnError(KilnErrorCode.Cancelled, 'the forward was cancelled before it started');
}
