import {
  type Device,
  type Model,
  type ModelLoadRequest,
  OpenContexts,
  type ServingProperties,
  type TensorDescriptor,
} from '@kiln/core';
import { TfModelRunner } from './execution/model-runner.js';
import type { TfTensorSpec } from './model/loaded-model.js';
import { type TfModelSpec, loadTfModel } from './model/load-model.js';
import type { TfRuntime } from './runtime/resolve-runtime.js';
import { TfExecutionContext } from './tf-execution-context.js';
import { TENSORFLOW_ENGINE_NAME } from './engine-name.js';

export { TENSORFLOW_ENGINE_NAME };

/**
 * Loads models into this thread's tfjs runtime; they run here and block the thread while
 * they compute. The worker pool runs them on the process's TensorFlow host thread.
 */
export class TfModelLoader {
  readonly description = 'in the loading thread';

  constructor(private readonly runtime: TfRuntime) {}

  get facts() {
    return this.runtime.facts;
  }

  async loadModel(spec: TfModelSpec, request: ModelLoadRequest): Promise<TfModel> {
    const model = await loadTfModel(this.runtime, spec);
    return new TfModel(request, new TfModelRunner(this.runtime, spec.name, model), this.runtime);
  }
}

/** A model loaded into this thread's tfjs runtime; its contexts share its weights. */
export class TfModel implements Model {
  readonly engine = TENSORFLOW_ENGINE_NAME;
  readonly name: string;
  readonly device: Device;
  readonly modelDir: string;
  readonly properties: ServingProperties;
  readonly inputs: readonly TensorDescriptor[];
  readonly outputs: readonly TensorDescriptor[];
  private readonly where: Readonly<Record<string, unknown>>;
  private readonly contexts: OpenContexts<TfExecutionContext>;

  constructor(
    request: ModelLoadRequest,
    private readonly runner: TfModelRunner,
    private readonly runtime: TfRuntime,
  ) {
    this.name = request.name;
    this.device = request.device;
    this.modelDir = request.modelDir;
    this.properties = request.properties;
    this.inputs = runner.model.inputs.map(descriptor);
    this.outputs = runner.model.outputs.map(descriptor);
    this.where = { backend: runtime.facts.backend, runsIn: 'the loading thread' };
    this.contexts = new OpenContexts<TfExecutionContext>(this.name);
  }

  describe(): Record<string, unknown> {
    return {
      ...this.runner.model.facts,
      ...this.where,
      inputs: this.inputs,
      outputs: this.outputs,
    };
  }

  async newExecutionContext(): Promise<TfExecutionContext> {
    this.contexts.assertOpen();
    const context = new TfExecutionContext(this.runner, this.runtime, () =>
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

function descriptor(spec: TfTensorSpec): TensorDescriptor {
  return {
    name: spec.name,
    ...(spec.dtype === undefined ? {} : { dtype: spec.dtype }),
    ...(spec.shape === undefined ? {} : { shape: spec.shape }),
  };
}
