import {
  type Device,
  type ExecutionContextOptions,
  KilnError,
  KilnErrorCode,
  type Model,
  type ModelLoadRequest,
  OpenContexts,
  type ServingProperties,
  type TensorDescriptor,
} from '@kiln/core';
import type { DlrLibraryHandle, DlrModelHandle, DlrTensorInfo } from '@kiln/dlr-native';
import { dtypeOfTvmType } from './dlr-dtypes.js';
import { toKilnError } from './dlr-errors.js';
import { DlrExecutionContext } from './dlr-execution-context.js';
import { type DlrModelOptions, deviceTypeName, parseDlrOptions } from './options.js';
import { type DlrFolderFiles, inspectDlrFolder } from './model-folder.js';

export interface DlrModelSettings {
  /** Threads of a predictor when neither option.numThreads nor the worker pool says. */
  readonly defaultThreads: number;
}

interface LoadedHandle {
  readonly handle: DlrModelHandle;
  readonly threads: number;
}

/**
 * A TVM-compiled model folder loaded by DLR. Every execution context gets its own DLR model
 * (DLR's runtime is not thread-safe, so predictors never share a handle); the handle made to
 * validate the folder and read its inputs and outputs is handed to the first context.
 */
export class DlrModel implements Model {
  readonly engine = 'DLR';
  private readonly contexts: OpenContexts<DlrExecutionContext>;

  private constructor(
    private readonly library: DlrLibraryHandle,
    readonly name: string,
    readonly device: Device,
    readonly modelDir: string,
    readonly properties: ServingProperties,
    readonly files: DlrFolderFiles,
    readonly options: DlrModelOptions,
    private readonly settings: DlrModelSettings,
    readonly inputs: readonly TensorDescriptor[],
    readonly outputs: readonly TensorDescriptor[],
    private readonly facts: {
      backend: string | null;
      outputNamesKnown: boolean;
      compiledFor: string;
    },
    private spare: LoadedHandle | undefined,
  ) {
    this.contexts = new OpenContexts(name);
  }

  static async load(
    library: DlrLibraryHandle,
    request: ModelLoadRequest,
    settings: DlrModelSettings,
  ): Promise<DlrModel> {
    const files = await inspectDlrFolder(request.modelDir);
    const options = parseDlrOptions(request.options, request.device);
    const compiledFor = await library.deviceTypeOf(request.modelDir);
    if (compiledFor.deviceType > 0 && compiledFor.deviceType !== options.deviceType) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `DLR model ${request.name} was compiled for ${deviceTypeName(compiledFor.deviceType)}, but is loaded on ` +
          `${deviceTypeName(options.deviceType)}: set load_on_devices or option.deviceType to match`,
      );
    }
    const threads = options.numThreads ?? settings.defaultThreads;
    const first = await createHandle(library, request.modelDir, options, threads, request.name);
    let inputs: TensorDescriptor[];
    let outputs: TensorDescriptor[];
    try {
      inputs = first.inputs.map((info) => descriptor(info, 'input'));
      outputs = first.outputs.map((info) => descriptor(info, 'output'));
    } catch (error) {
      await first.dispose().catch(() => undefined);
      throw error;
    }
    return new DlrModel(
      library,
      request.name,
      request.device,
      request.modelDir,
      request.properties,
      files,
      options,
      settings,
      inputs,
      outputs,
      {
        backend: first.backend,
        outputNamesKnown: first.outputNamesKnown,
        compiledFor:
          compiledFor.deviceType > 0
            ? deviceTypeName(compiledFor.deviceType)
            : `unknown (${compiledFor.error})`,
      },
      { handle: first, threads },
    );
  }

  /**
   * A context with its own DLR model. Its threads: option.numThreads, else the pool's
   * `intraOpThreads`, else the engine's default (1, as DJL found best for several workers).
   */
  async newExecutionContext(options: ExecutionContextOptions = {}): Promise<DlrExecutionContext> {
    this.contexts.assertOpen();
    const threads =
      this.options.numThreads ?? options.intraOpThreads ?? this.settings.defaultThreads;
    let loaded = this.spare;
    this.spare = undefined;
    if (loaded && loaded.threads !== threads) {
      await loaded.handle.dispose().catch(() => undefined);
      loaded = undefined;
    }
    const handle =
      loaded?.handle ??
      (await createHandle(this.library, this.modelDir, this.options, threads, this.name));
    return this.contexts.track(
      new DlrExecutionContext(handle, this.inputs, threads, (c) => this.contexts.release(c)),
    );
  }

  describe(): Record<string, unknown> {
    return {
      engine: this.engine,
      modelDir: this.modelDir,
      files: { ...this.files },
      backend: this.facts.backend,
      compiledFor: this.facts.compiledFor,
      deviceType: deviceTypeName(this.options.deviceType),
      deviceId: this.options.deviceId,
      numThreads: this.options.numThreads ?? 'per context',
      outputNamesKnown: this.facts.outputNamesKnown,
      inputs: this.inputs,
      outputs: this.outputs,
      openContexts: this.contexts.size,
    };
  }

  /** Closes the contexts made from this model and deletes every handle. */
  async dispose(): Promise<void> {
    if (this.contexts.closed) return;
    const spare = this.spare;
    this.spare = undefined;
    await this.contexts.closeAll(spare?.handle.dispose());
  }
}

async function createHandle(
  library: DlrLibraryHandle,
  modelDir: string,
  options: DlrModelOptions,
  numThreads: number,
  name: string,
): Promise<DlrModelHandle> {
  try {
    return await library.createModel({
      modelPath: modelDir,
      deviceType: options.deviceType,
      deviceId: options.deviceId,
      numThreads,
    });
  } catch (error) {
    throw toKilnError(
      error,
      KilnErrorCode.ModelLoadFailed,
      `cannot load DLR model ${name} from ${modelDir}`,
    );
  }
}

function descriptor(info: DlrTensorInfo, kind: string): TensorDescriptor {
  return {
    name: info.name,
    dtype: dtypeOfTvmType(info.type, `${kind} ${JSON.stringify(info.name)}`),
    shape: [...info.shape],
  };
}
