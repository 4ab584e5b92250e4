import {
  type ForwardOptions,
  KilnError,
  KilnErrorCode,
  type ModelLoadRequest,
  type NDList,
  OpenContexts,
} from '@kiln/core';
import { cancelledError } from '../execution/cancellation.js';
import { TfModelRunner } from '../execution/model-runner.js';
import { type TfModelSpec, loadTfModel } from '../model/load-model.js';
import { memoryOf } from '../runtime/memory.js';
import type { TfRuntime } from '../runtime/resolve-runtime.js';
import type { TfMemoryInfo } from '../runtime/tfjs-api.js';
import { type TfExecutionContext, TfModelBase } from './model-base.js';

/**
 * Loads models into this thread's tfjs runtime; they run here and block the thread while
 * they compute. The worker pool runs them on the process's TensorFlow host thread.
 */
export class TfModels {
  readonly description = 'in the loading thread';

  constructor(private readonly runtime: TfRuntime) {}

  get facts() {
    return this.runtime.facts;
  }

  async loadModel(spec: TfModelSpec, request: ModelLoadRequest): Promise<TfModelBase> {
    const model = await loadTfModel(this.runtime, spec);
    return new InlineModel(
      request,
      new TfModelRunner(this.runtime, spec.name, model),
      this.runtime,
    );
  }
}

class InlineModel extends TfModelBase {
  private readonly contexts = new OpenContexts<InlineContext>(this.name);

  constructor(
    request: ModelLoadRequest,
    private readonly runner: TfModelRunner,
    private readonly runtime: TfRuntime,
  ) {
    super(request, runner.model, {
      backend: runtime.facts.backend,
      runsIn: 'the loading thread',
    });
  }

  async newExecutionContext(): Promise<TfExecutionContext> {
    this.contexts.assertOpen();
    const context = new InlineContext(this.runner, this.runtime, () =>
      this.contexts.release(context),
    );
    return this.contexts.track(context);
  }

  async dispose(): Promise<void> {
    if (this.contexts.closed) return;
    await this.contexts.closeAll();
    this.runner.dispose();
  }
}

/** Contexts of one model share its weights; the runner serialises their runs. */
class InlineContext implements TfExecutionContext {
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
