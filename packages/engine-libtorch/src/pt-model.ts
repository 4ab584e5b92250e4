import { basename } from 'node:path';
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
import type {
  ArgumentDescription,
  LibTorchBinding,
  ModuleDescription,
  ModuleWrap,
} from '@kiln/libtorch-native';
import { findModelFile } from './model-file.js';
import { native } from './native.js';
import {
  type LibTorchEngineOptions,
  type PtModelSettings,
  resolveModelSettings,
} from './options.js';
import { PtExecutionContext } from './pt-execution-context.js';
import {
  type PtSignature,
  SIGNATURE_FILE,
  parseSignature,
  signatureFromSchema,
} from './signature.js';
import { parseWarmup } from './warmup.js';
import { ENGINE_NAME } from './engine-name.js';

export { ENGINE_NAME };

/** LibTorch's name for a Kiln device. */
export function torchDevice(device: Device): string {
  return device.type === 'cpu' ? 'cpu' : `cuda:${device.id}`;
}

/**
 * A TorchScript model. The module is loaded once; every execution context shares it, so the
 * weights are in memory once however many predictors serve the model.
 */
export class PtModel implements Model {
  readonly engine = ENGINE_NAME;
  readonly name: string;
  readonly device: Device;
  readonly modelDir: string;
  readonly properties: ServingProperties;
  readonly inputs: readonly TensorDescriptor[];
  readonly outputs: readonly TensorDescriptor[];
  /** The `extraFiles` asked for (option.extraFiles) that the archive holds, as text. */
  readonly extraFiles: Readonly<Record<string, string>>;
  /** The signature stored in the archive, when there is one: inputs are checked against it. */
  readonly declaredSignature: PtSignature | undefined;
  readonly forwardArguments: readonly ArgumentDescription[];
  private readonly description: ModuleDescription;
  private readonly contexts: OpenContexts<PtExecutionContext>;

  private constructor(
    request: ModelLoadRequest,
    readonly file: string,
    readonly settings: PtModelSettings,
    private readonly module: ModuleWrap,
    files: Readonly<Record<string, string>>,
    /** Why the default optimize_for_inference was not applied, when it failed. */
    private readonly optimizeError: string | undefined = undefined,
  ) {
    this.name = request.name;
    this.device = request.device;
    this.modelDir = request.modelDir;
    this.properties = request.properties;
    this.contexts = new OpenContexts(request.name);
    this.description = module.describe();
    this.forwardArguments = this.description.forward.arguments;
    const stored = files[SIGNATURE_FILE];
    this.declaredSignature = stored === undefined ? undefined : parseSignature(stored, file);
    const signature = this.declaredSignature ?? signatureFromSchema(this.forwardArguments);
    this.inputs = signature.inputs;
    this.outputs = signature.outputs;
    this.extraFiles = Object.fromEntries(
      settings.extraFiles.filter((f) => f in files).map((f) => [f, files[f]!]),
    );
  }

  /** Loads the module once, then runs the configured warm-up shapes. */
  static async load(
    binding: LibTorchBinding,
    request: ModelLoadRequest,
    engine: LibTorchEngineOptions,
  ): Promise<PtModel> {
    const settings = resolveModelSettings(request.options, engine);
    const file = await findModelFile(
      request.modelDir,
      request.name,
      request.modelFile,
      request.options.modelName,
    );
    if (settings.numInteropThreads !== undefined) {
      await native(() => binding.setGlobals({ numInteropThreads: settings.numInteropThreads }));
    }
    const load = (optimizeForInference: boolean) =>
      native(
        () =>
          binding.ModuleWrap.load(file, {
            device: torchDevice(request.device),
            mapLocation: settings.mapLocation,
            extraFiles: [...settings.extraFiles, SIGNATURE_FILE],
            optimizeForInference,
          }),
        KilnErrorCode.ModelLoadFailed,
      );
    let loaded: Awaited<ReturnType<typeof load>>;
    let optimizeError: string | undefined;
    try {
      loaded = await load(settings.optimizeForInference);
    } catch (error) {
      // Freezing fails on some modules (attributes set in forward, unsupported ops): by
      // default such a module still loads, unoptimized, and describe() says why.
      if (!settings.optimizeForInference || !settings.optimizeByDefault) throw error;
      loaded = await load(false);
      optimizeError = error instanceof Error ? error.message : String(error);
    }
    const { module, extraFiles } = loaded;
    let model: PtModel;
    try {
      model = new PtModel(request, file, settings, module, extraFiles, optimizeError);
      if (settings.warmup) await model.warmUp(settings.warmup, settings.warmupIterations);
    } catch (error) {
      module.dispose();
      throw KilnError.wrap(
        error,
        KilnErrorCode.ModelLoadFailed,
        `${basename(file)}: warm-up failed`,
      );
    }
    return model;
  }

  describe(): Record<string, unknown> {
    const d = this.description;
    return {
      engine: ENGINE_NAME,
      file: this.file,
      device: d.device,
      forward: d.forward.schema,
      methods: d.methods,
      parameters: d.parameters,
      buffers: d.buffers,
      optimizedForInference: d.optimizedForInference,
      ...(this.optimizeError === undefined ? {} : { optimizeError: this.optimizeError }),
      signature: this.declaredSignature ? 'stored' : 'schema',
      extraFiles: Object.keys(this.extraFiles),
      settings: this.settings,
    };
  }

  get disposed(): boolean {
    return this.contexts.closed;
  }

  /** A context sharing the module, with a native thread of its own. */
  async newExecutionContext(options: ExecutionContextOptions = {}): Promise<PtExecutionContext> {
    this.contexts.assertOpen();
    return this.contexts.track(
      new PtExecutionContext(
        this,
        this.module.createContext(),
        options.intraOpThreads,
        this.device.type === 'cpu' ? options.cpuCores : undefined,
      ),
    );
  }

  /** Called by a context when it closes. */
  contextClosed(context: PtExecutionContext): void {
    this.contexts.release(context);
  }

  /** Drops the module and closes its contexts; forwards already running finish first. */
  async dispose(): Promise<void> {
    if (this.contexts.closed) return;
    await this.contexts.closeAll();
    this.module.dispose();
  }

  private async warmUp(spec: string, iterations: number): Promise<void> {
    const context = await this.newExecutionContext();
    for (const input of parseWarmup(spec, this.inputs)) {
      for (let i = 0; i < iterations; i++) await context.forward(input);
    }
    await context.close();
  }
}
