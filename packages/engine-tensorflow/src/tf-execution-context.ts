import {
  type ExecutionContext,
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type NDList,
} from '@kiln/core';
import { cancelledError } from './execution/cancellation.js';
import type { TfModelRunner } from './execution/model-runner.js';
import { memoryOf } from './runtime/memory.js';
import type { TfRuntime } from './runtime/resolve-runtime.js';
import type { TfMemoryInfo } from './runtime/tfjs-api.js';

/**
 * A TensorFlow execution context; `memory()` reads tfjs's memory in the thread it runs in.
 * Contexts of one model share its weights; the runner serialises their runs.
 */
export class TfExecutionContext implements ExecutionContext {
  private closed = false;

  constructor(
    private readonly runner: TfModelRunner,
    private readonly runtime: TfRuntime,
    private readonly onClose: () => void,
  ) {}

  forward(input: NDList, options: ForwardOptions = {}): Promise<NDList> {
    if (this.closed)
      return Promise.reject(new KilnError(KilnErrorCode.Closed, 'execution context is closed'));
    if (options.signal?.aborted) return Promise.reject(cancelledError(options.signal));
    return this.runner.run(input);
  }

  memory(): Promise<TfMemoryInfo> {
    return Promise.resolve(memoryOf(this.runtime.tf));
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.onClose();
    }
    return Promise.resolve();
  }
}
