import {
  type Device,
  type ExecutionContextOptions,
  type Model,
  type ModelLoadRequest,
  OpenContexts,
  type ServingProperties,
  type TensorDescriptor,
} from '@kiln/core';
import { type ServedModelFile, openServed } from './decoder/new-kv-model-file.js';
import { type OrtStepDecoder, createOrtStepDecoder } from './decoder/ort-step-decoder.js';
import { OrtExecutionContext } from './ort-execution-context.js';
import { findModelFile, modelFileBytes } from './model-file.js';
import { type OrtSessionConfig, parseSessionConfig } from './options.js';
import { SessionRunner } from './session-runner.js';
import type { WeightSharing } from './shared-weights.js';

/** What makes a session fit a context: its thread count and the cores they are placed on. */
interface ContextSettings {
  readonly intraOpNumThreads: number | undefined;
  readonly cpuCores: readonly number[] | undefined;
}

function contextSettings(config: OrtSessionConfig): ContextSettings {
  return { intraOpNumThreads: config.intraOpNumThreads, cpuCores: config.cpuCores };
}

export interface OrtModelSettings {
  readonly sessionDefaults?: Partial<OrtSessionConfig>;
}

/**
 * An ONNX model loaded by OnnxRuntime. Loading creates one session (to validate the file and
 * read its inputs and outputs); the first execution context or step decoder with the same
 * settings takes that session over instead of loading the model again.
 */
export class OrtModel implements Model {
  readonly engine = 'OnnxRuntime';
  private readonly contexts: OpenContexts<OrtExecutionContext | OrtStepDecoder>;

  private constructor(
    readonly name: string,
    readonly device: Device,
    readonly modelDir: string,
    readonly modelPath: string,
    readonly properties: ServingProperties,
    readonly config: OrtSessionConfig,
    readonly inputs: readonly TensorDescriptor[],
    readonly outputs: readonly TensorDescriptor[],
    private readonly bytes: number,
    private readonly weightSharing: WeightSharing,
    /** The file the sessions open: a decoder's copy with its new positions as outputs. */
    private readonly served: ServedModelFile,
    private spare: { session: SessionRunner; settings: ContextSettings } | undefined,
  ) {
    this.contexts = new OpenContexts(name);
  }

  static async load(request: ModelLoadRequest, settings: OrtModelSettings = {}): Promise<OrtModel> {
    const config = parseSessionConfig(request.options, request.device, settings.sessionDefaults);
    const modelPath = await findModelFile(
      request.modelDir,
      request.name,
      request.modelFile,
      request.options.modelName,
      request.options.dtype,
    );
    // Opened with the threads the first context will ask for, so that it can take this one.
    const first = {
      ...config,
      intraOpNumThreads: config.intraOpNumThreads ?? request.intraOpThreads,
      cpuCores: request.cpuCores,
    };
    const { opened: session, served } = await openServed(
      modelPath,
      config.optimizedModelCache,
      (path) => SessionRunner.create(path, first),
    );
    const size = await modelFileBytes(modelPath);
    return new OrtModel(
      request.name,
      request.device,
      request.modelDir,
      modelPath,
      request.properties,
      config,
      session.inputs,
      session.outputs,
      size,
      session.weightSharing,
      served,
      { session, settings: contextSettings(first) },
    );
  }

  /**
   * A fresh context. `intraOpThreads` applies unless the model's options set
   * intraOpNumThreads themselves.
   */
  async newExecutionContext(options: ExecutionContextOptions = {}): Promise<OrtExecutionContext> {
    const session = await this.takeSession(options);
    // Intra-op threads are placed on the cores (session.intra_op_thread_affinities).
    const pinned = this.device.type === 'cpu' ? options.cpuCores : undefined;
    const context = new OrtExecutionContext(session, (c) => this.contexts.release(c), pinned);
    await this.contexts.track(context);
    return context;
  }

  /**
   * A step decoder over this model (a KV-cache decoder with a config.json), in the calling
   * thread and with a session set up as an execution context's would be.
   */
  async newStepDecoder(options: ExecutionContextOptions = {}): Promise<OrtStepDecoder> {
    const session = await this.takeSession(options);
    const decoder = await createOrtStepDecoder(
      session,
      { dir: this.modelDir, modelBytes: this.bytes },
      (d) => this.contexts.release(d),
    );
    await this.contexts.track(decoder);
    return decoder;
  }

  /** A session with the context's threads and cores: the one opened at load when it fits. */
  private async takeSession(options: ExecutionContextOptions): Promise<SessionRunner> {
    this.contexts.assertOpen();
    const config: OrtSessionConfig = {
      ...this.config,
      intraOpNumThreads: this.config.intraOpNumThreads ?? options.intraOpThreads,
      cpuCores: options.cpuCores,
    };
    const spare = this.spare;
    this.spare = undefined;
    if (spare && JSON.stringify(contextSettings(config)) === JSON.stringify(spare.settings))
      return spare.session;
    await spare?.session.close();
    return SessionRunner.create(this.served.path, config);
  }

  describe(): Record<string, unknown> {
    return {
      engine: this.engine,
      file: this.modelPath,
      bytes: this.bytes,
      session: { ...this.config },
      weights: this.weightSharing,
      inputs: this.inputs,
      outputs: this.outputs,
      openContexts: this.contexts.size,
    };
  }

  /** Closes the contexts made from this model. */
  async dispose(): Promise<void> {
    if (this.contexts.closed) return;
    const spare = this.spare;
    this.spare = undefined;
    await this.contexts.closeAll(spare?.session.close());
    await this.served.release();
  }
}
