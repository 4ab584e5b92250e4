import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import {
  KilnError,
  KilnErrorCode,
  type Device,
  type ExecutionContextOptions,
  type Model,
  type ModelLoadRequest,
  type ServingProperties,
  type TensorDescriptor,
  preloadFor,
  wantsRollingBatch,
} from '@kiln/core';
import { ENGINE_NAME } from './engine-name.js';
import { type PythonModelSettings, resolveModelSettings } from './options.js';
import { PythonServingContext } from './python-serving-context.js';
import { PythonStepDecoder } from './python-step-decoder.js';
import type { PythonWorkerOptions } from './python-worker.js';
import { type RequirementsReport, prepareRequirements, venvPython } from './requirements.js';
import { workerEnv } from './thread-env.js';

export { ENGINE_NAME };

/** A folder with model.py; every serving context is its own Python process. */
export class PythonModel implements Model {
  readonly engine = ENGINE_NAME;
  readonly device: Device;
  readonly inputs: readonly TensorDescriptor[] = [];
  readonly outputs: readonly TensorDescriptor[] = [];
  readonly name: string;
  readonly modelDir: string;
  readonly properties: ServingProperties;
  /** Its Python processes: serving contexts, or step decoders. */
  private readonly contexts = new Set<PythonServingContext | PythonStepDecoder>();

  private constructor(
    request: ModelLoadRequest,
    readonly settings: PythonModelSettings,
    readonly pythonVersion: string,
    readonly requirements: RequirementsReport | undefined,
  ) {
    this.name = request.name;
    this.modelDir = request.modelDir;
    this.properties = request.properties;
    this.device = request.device;
    this.initProperties = initPropertiesOf(request);
  }

  /** The serving.properties handed to the init call, as DJL Serving hands them. */
  readonly initProperties: Readonly<Record<string, string>>;

  static async load(request: ModelLoadRequest): Promise<PythonModel> {
    const settings = resolveModelSettings(request.options, request.properties.raw);
    checkEntryPoint(request, settings.entryPoint);
    const pythonVersion = await pythonVersionOf(settings.pythonExecutable);
    const requirements = await prepareRequirements({
      modelName: request.name,
      modelDir: request.modelDir,
      pythonExecutable: settings.pythonExecutable,
      enableVenv: settings.enableVenv,
      timeoutMs: settings.loadTimeoutMs,
      ...(settings.venvRoot ? { venvRoot: settings.venvRoot } : {}),
    });
    // Workers run the venv's interpreter, which sees the system's packages as well.
    const effective = requirements?.venv
      ? { ...settings, pythonExecutable: venvPython(requirements.venv) }
      : settings;
    return new PythonModel(request, effective, pythonVersion, requirements);
  }

  describe(): Record<string, unknown> {
    return {
      entryPoint: this.settings.entryPoint,
      handler: wantsRollingBatch(this.properties)
        ? this.settings.stepHandler
        : this.settings.handler,
      pythonExecutable: this.settings.pythonExecutable,
      pythonVersion: this.pythonVersion,
      venv: this.requirements?.venv ?? null,
      ...(this.requirements
        ? {
            requirements: this.requirements.requirements,
            ...(this.requirements.unsatisfied
              ? { unsatisfiedRequirements: this.requirements.unsatisfied }
              : {}),
          }
        : {}),
      sharedMemory: this.settings.sharedMemory,
      maxResponseBytes: this.settings.maxResponseBytes ?? null,
      maxWorkerRssBytes: this.settings.maxRssBytes ?? null,
      allocator: this.settings.allocator,
      workers: this.contexts.size,
    };
  }

  /** model_loading_timeout: the time a worker has to start (import model.py, initialize). */
  get contextStartTimeoutMs(): number {
    return this.settings.loadTimeoutMs;
  }

  /** Request bodies reach handle(inputs) as they arrived; its Output is the response. */
  async newServingContext(
    options: ExecutionContextOptions & { readonly signal?: AbortSignal } = {},
  ): Promise<PythonServingContext> {
    const context = await PythonServingContext.start(
      this.workerOptions(options),
      () => this.contexts.delete(context),
      options.signal,
    );
    this.contexts.add(context);
    return context;
  }

  /**
   * A step worker's decoder (option.rolling_batch): its own Python process, holding the object
   * that model.py's step handler (option.handler, default `StepHandler`) returned.
   */
  async newStepDecoder(
    options: ExecutionContextOptions & { readonly signal?: AbortSignal } = {},
  ): Promise<PythonStepDecoder> {
    const decoder = await PythonStepDecoder.start(
      { ...this.workerOptions(options), handler: this.settings.stepHandler },
      () => this.contexts.delete(decoder),
      options.signal,
    );
    this.contexts.add(decoder);
    return decoder;
  }

  private workerOptions(options: ExecutionContextOptions): PythonWorkerOptions {
    return {
      modelName: this.name,
      modelDir: this.modelDir,
      ...this.settings,
      env: {
        ...workerEnv(this.settings.env, options.intraOpThreads),
        // Core pinning: the worker sets its own affinity before it loads the handler.
        ...(options.cpuCores ? { KILN_CPU_CORES: options.cpuCores.join(',') } : {}),
        // Last: option.env's own LD_PRELOAD entries are kept behind the allocator.
        ...preloadFor(this.settings.allocatorLibrary, {
          ...process.env,
          ...this.settings.env,
        }),
      },
      deviceId: this.device.type === 'gpu' ? String(this.device.id) : '-1',
      initProperties: this.initProperties,
    };
  }

  /** Tensors in and out (Model's contract): a serving context, fed raw tensors. */
  newExecutionContext(options: ExecutionContextOptions = {}): Promise<PythonServingContext> {
    return this.newServingContext(options);
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.contexts].map((context) => context.close()));
  }
}

/** `option.entryPoint`: a `.py` file of the model's folder, or a module name (`pkg.handlers`). */
function checkEntryPoint(request: ModelLoadRequest, entryPoint: string): void {
  if (entryPoint.endsWith('.py')) {
    if (existsSync(join(request.modelDir, entryPoint))) return;
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `model ${request.name} has no ${entryPoint} (option.entryPoint)`,
    );
  }
  if (!/^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(entryPoint)) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `option.entryPoint ${JSON.stringify(entryPoint)} is neither a .py file nor a module name`,
    );
  }
}

/**
 * DJL's init parameters: serving.properties' own keys (batch_size, …) and its `option.*` keys
 * without the prefix (caller overrides included), but not `option.env`, which sets the
 * process's environment.
 */
function initPropertiesOf(request: ModelLoadRequest): Record<string, string> {
  const properties: Record<string, string> = {};
  for (const [key, value] of Object.entries(request.properties.raw)) {
    if (!key.startsWith('option.')) properties[key] = value;
  }
  for (const [key, value] of Object.entries(request.options)) {
    if (key !== 'env') properties[key] = value;
  }
  return properties;
}

async function pythonVersionOf(executable: string): Promise<string> {
  try {
    const { stdout } = await promisify(execFile)(
      executable,
      ['-c', 'import platform; print(platform.python_version())'],
      { timeout: 30_000 },
    );
    return stdout.trim();
  } catch (error) {
    throw new KilnError(
      KilnErrorCode.ModelLoadFailed,
      `cannot run ${executable} (option.pythonExecutable): ${(error as Error).message}`,
    );
  }
}
