import { stat } from 'node:fs/promises';
import { isMainThread } from 'node:worker_threads';
import {
  type Device,
  type ExecutionContextOptions,
  type Model,
  type ModelLoadRequest,
  OpenContexts,
  type ServingProperties,
  type TensorDescriptor,
} from '@kiln/core';
import { OrtExecutionContext, type SessionThread } from './ort-execution-context.js';
import { findModelFile } from './model-file.js';
import { type OrtSessionConfig, parseSessionConfig } from './session-config.js';
import type { SessionHost } from './session-host.js';
import { SessionRunner } from './session-runner.js';
import { WorkerSessionHost } from './worker-session-host.js';

/** 'auto': a worker thread per context on the main thread, the calling thread inside workers. */
export type SessionThreadPolicy = 'auto' | SessionThread;

export interface OrtModelSettings {
  readonly sessionDefaults?: Partial<OrtSessionConfig>;
  readonly sessionThread?: SessionThreadPolicy;
}

/**
 * An ONNX model loaded by OnnxRuntime. Loading creates one session (to validate the file and
 * read its inputs and outputs); the first execution context with the same settings takes
 * that session over instead of loading the model again.
 */
export class OrtModel implements Model {
  readonly engine = 'OnnxRuntime';
  private readonly contexts: OpenContexts<OrtExecutionContext>;

  private constructor(
    readonly name: string,
    readonly device: Device,
    readonly modelDir: string,
    readonly modelPath: string,
    readonly properties: ServingProperties,
    readonly config: OrtSessionConfig,
    private readonly thread: SessionThread,
    readonly inputs: readonly TensorDescriptor[],
    readonly outputs: readonly TensorDescriptor[],
    private readonly bytes: number,
    private spare: SessionHost | undefined,
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
    );
    const thread = resolveThread(settings.sessionThread ?? 'auto');
    const host = await startHost(thread, modelPath, config);
    const { size } = await stat(modelPath);
    return new OrtModel(
      request.name,
      request.device,
      request.modelDir,
      modelPath,
      request.properties,
      config,
      thread,
      host.inputs,
      host.outputs,
      size,
      host,
    );
  }

  /**
   * A fresh context. `intraOpThreads` applies unless the model's options set
   * intraOpNumThreads themselves.
   */
  async newExecutionContext(options: ExecutionContextOptions = {}): Promise<OrtExecutionContext> {
    this.contexts.assertOpen();
    const config: OrtSessionConfig = {
      ...this.config,
      intraOpNumThreads: this.config.intraOpNumThreads ?? options.intraOpThreads,
    };
    let host = this.spare;
    this.spare = undefined;
    if (host && config.intraOpNumThreads !== this.config.intraOpNumThreads) {
      await host.close();
      host = undefined;
    }
    host ??= await startHost(this.thread, this.modelPath, config);
    return this.contexts.track(
      new OrtExecutionContext(host, this.thread, (c) => this.contexts.release(c)),
    );
  }

  describe(): Record<string, unknown> {
    return {
      engine: this.engine,
      file: this.modelPath,
      bytes: this.bytes,
      sessionThread: this.thread,
      session: { ...this.config },
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
    await this.contexts.closeAll(spare?.close());
  }
}

function resolveThread(policy: SessionThreadPolicy): SessionThread {
  if (policy !== 'auto') return policy;
  return isMainThread ? 'worker' : 'calling';
}

function startHost(
  thread: SessionThread,
  modelPath: string,
  config: OrtSessionConfig,
): Promise<SessionHost> {
  return thread === 'worker'
    ? WorkerSessionHost.start(modelPath, config)
    : SessionRunner.create(modelPath, config);
}
