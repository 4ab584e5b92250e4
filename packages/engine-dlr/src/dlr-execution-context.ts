import {
  type ExecutionContext,
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type NDList,
  type TensorDescriptor,
} from '@kiln/core';
import type { DlrModelHandle } from '@kiln/dlr-native';
import { toKilnError } from './dlr-errors.js';
import { dlrInputs, outputList } from './dlr-tensors.js';

/**
 * One DLR model handle used as a Kiln execution context. The handle is this context's alone
 * (DLR's runtime is not thread-safe); forwards run one at a time in call order, each off the
 * event loop, and close() waits for the running one.
 */
export class DlrExecutionContext implements ExecutionContext {
  private tail: Promise<unknown> = Promise.resolve();
  private closing: Promise<void> | undefined;
  private runs = 0;

  constructor(
    private readonly handle: DlrModelHandle,
    private readonly inputs: readonly TensorDescriptor[],
    /** Threads DLR was given for this handle. */
    readonly numThreads: number,
    private readonly onClose: (context: DlrExecutionContext) => void,
  ) {}

  /** Forward calls completed so far. */
  get completedRuns(): number {
    return this.runs;
  }

  forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    if (this.closing)
      return Promise.reject(
        new KilnError(KilnErrorCode.Closed, 'the DLR execution context is closed'),
      );
    let tensors;
    try {
      tensors = dlrInputs(this.inputs, input);
    } catch (error) {
      return Promise.reject(error);
    }
    const next = this.tail.then(async () => {
      if (options.signal?.aborted) throw cancelled(options.signal);
      try {
        const output = outputList(await this.handle.run(tensors));
        this.runs++;
        return output;
      } catch (error) {
        throw toKilnError(error, KilnErrorCode.EngineError);
      }
    });
    this.tail = next.catch(() => undefined);
    return next;
  }

  /** Deletes the handle once the running forward ends. Rejects with DLR's message if DLR reports an error. */
  close(): Promise<void> {
    this.closing ??= this.tail.then(async () => {
      this.onClose(this);
      try {
        await this.handle.dispose();
      } catch (error) {
        throw toKilnError(error, KilnErrorCode.EngineError, 'closing the DLR model');
      }
    });
    return this.closing;
  }
}

function cancelled(signal: AbortSignal): KilnError {
  const reason: unknown = signal.reason;
  return reason instanceof KilnError
    ? reason
    : new KilnError(KilnErrorCode.Cancelled, 'the forward was cancelled before it started');
}
