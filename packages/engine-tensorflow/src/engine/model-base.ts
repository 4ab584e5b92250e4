import type {
  Device,
  ExecutionContext,
  ExecutionContextOptions,
  Model,
  ModelLoadRequest,
  ServingProperties,
  TensorDescriptor,
} from '@kiln/core';
import type { TfModelFormat, TfTensorSpec } from '../model/loaded-model.js';
import type { TfMemoryInfo } from '../runtime/tfjs-api.js';

export const TENSORFLOW_ENGINE_NAME = 'TensorFlow';

/** A TensorFlow execution context; `memory()` reads tfjs's memory in the thread it runs in. */
export interface TfExecutionContext extends ExecutionContext {
  memory(): Promise<TfMemoryInfo>;
}

/** What a model reported when it was loaded, wherever it runs. */
export interface TfModelSummary {
  readonly format: TfModelFormat;
  readonly inputs: readonly TfTensorSpec[];
  readonly outputs: readonly TfTensorSpec[];
  readonly facts: Readonly<Record<string, unknown>>;
}

/** The parts of a TensorFlow Model that do not depend on where it runs. */
export abstract class TfModelBase implements Model {
  readonly engine = TENSORFLOW_ENGINE_NAME;
  readonly name: string;
  readonly device: Device;
  readonly modelDir: string;
  readonly properties: ServingProperties;
  readonly inputs: readonly TensorDescriptor[];
  readonly outputs: readonly TensorDescriptor[];

  protected constructor(
    request: ModelLoadRequest,
    private readonly summary: TfModelSummary,
    private readonly where: Readonly<Record<string, unknown>>,
  ) {
    this.name = request.name;
    this.device = request.device;
    this.modelDir = request.modelDir;
    this.properties = request.properties;
    this.inputs = summary.inputs.map(descriptor);
    this.outputs = summary.outputs.map(descriptor);
  }

  describe(): Record<string, unknown> {
    return { ...this.summary.facts, ...this.where, inputs: this.inputs, outputs: this.outputs };
  }

  abstract newExecutionContext(options?: ExecutionContextOptions): Promise<TfExecutionContext>;
  abstract dispose(): Promise<void>;
}

function descriptor(spec: TfTensorSpec): TensorDescriptor {
  return {
    name: spec.name,
    ...(spec.dtype === undefined ? {} : { dtype: spec.dtype }),
    ...(spec.shape === undefined ? {} : { shape: spec.shape }),
  };
}
