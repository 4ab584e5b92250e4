import type { StepDecoder } from '../generation/step-decoder.js';
import type { Device } from '../engine/device.js';
import type { ExecutionContext } from '../engine/execution.js';
import type { DType } from '../tensor/dtype.js';
import type { Shape } from '../tensor/shape.js';
import type { ServingProperties } from '../loading/serving-properties.js';
import type { KilnError } from '../errors.js';
import type { PredictResult } from '../translate/predictor.js';
import type { ServingChunkSink, ServingInput, ServingOutput } from '../translate/serving-io.js';

/** A model input or output: name, element type and shape (-1 for a dynamic dimension). */
export interface TensorDescriptor {
  readonly name: string;
  /** Undefined when the model does not declare it (TorchScript): any dtype is accepted. */
  readonly dtype?: DType;
  /**
   * Undefined when the model does not declare its rank (TorchScript): any shape is accepted.
   * `[]` is a scalar; -1 is a dimension of any size.
   */
  readonly shape?: Shape;
}

/** What an engine needs to load a model that Kiln has already located on disk. */
export interface ModelLoadRequest {
  /** Model name (from the URL, serving.properties or the folder name). */
  readonly name: string;
  /** Local folder holding the model files. */
  readonly modelDir: string;
  /** The model file inside `modelDir`, when Kiln or the user picked one. */
  readonly modelFile?: string;
  readonly device: Device;
  /** `option.*` keys of serving.properties with the prefix removed, plus caller overrides. */
  readonly options: Readonly<Record<string, string>>;
  readonly properties: ServingProperties;
  /**
   * Intra-op threads the first execution context will ask for (the worker pool's thread
   * budget): an engine that opens a session while loading may open it with these, so that the
   * first context takes that session over instead of opening another.
   */
  readonly intraOpThreads?: number;
  /** Cores the first execution context will be pinned to (see ExecutionContextOptions). */
  readonly cpuCores?: readonly number[];
}

export interface ExecutionContextOptions {
  /** Intra-op threads for this context; the worker pool sets it to avoid oversubscription. */
  intraOpThreads?: number;
  /**
   * Logical CPUs this context's compute threads should run on (core pinning, Linux). Engines
   * that pin say so in the context's `pinnedCores`; others leave the threads where they are.
   */
  cpuCores?: readonly number[];
}

/**
 * What a `serve` worker runs (Python mode): requests in as the HTTP or gRPC layer built them,
 * one result per request out, with no tensors or translator between. One call at a time.
 */
export interface ServingContext {
  /**
   * Each input succeeds or fails on its own; rejects only when the context died under it. An
   * input with a sink in `onChunk` (by index) may answer in pieces through it, its result then
   * `{ type: 'streamed' }`; without one, a streamed answer is gathered into one.
   */
  serve(
    inputs: readonly ServingInput[],
    options?: {
      readonly signal?: AbortSignal;
      readonly onChunk?: readonly (ServingChunkSink | undefined)[];
    },
  ): Promise<PredictResult<ServingOutput>[]>;
  /** Called once when the context dies (process exit, kill, limit crossed): the pool replaces it. */
  onDeath(listener: (error: KilnError) => void): void;
  /** The cores it runs on, when it was asked to pin and did. */
  readonly pinnedCores?: readonly number[];
  close(): Promise<void>;
}

/** A loaded model. Predictors are made from it; it is disposed once nothing uses it. */
export interface Model {
  readonly name: string;
  readonly engine: string;
  readonly device: Device;
  readonly modelDir: string;
  readonly inputs: readonly TensorDescriptor[];
  readonly outputs: readonly TensorDescriptor[];
  readonly properties: ServingProperties;
  /** What the engine reports about this model (file, opset, size, options in force…). */
  describe(): Record<string, unknown>;
  /** A fresh execution context: one forward in flight at a time (`forward` workers). */
  newExecutionContext(options?: ExecutionContextOptions): Promise<ExecutionContext>;
  /**
   * A step decoder over this model for a `step` worker (rolling batch): engines whose
   * provider lists `step` in `workerKinds` implement it. It runs where the worker runs.
   */
  newStepDecoder?(options?: ExecutionContextOptions): Promise<StepDecoder>;
  /**
   * A serving context for a `serve` worker: engines whose provider lists `serve` in
   * `workerKinds` implement it, with `contextStartTimeoutMs`, the time a context may take to
   * start (its loading timeout), which is the pool's start timeout for these workers.
   */
  newServingContext?(
    options?: ExecutionContextOptions & {
      /** Aborted when the pool gives up on the start (its start timeout): the start ends. */
      readonly signal?: AbortSignal;
    },
  ): Promise<ServingContext>;
  readonly contextStartTimeoutMs?: number;
  dispose(): Promise<void>;
}
