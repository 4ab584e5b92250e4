import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import {
  CPU,
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  bytesOf,
  viewBytes,
  type AnyTensor,
  type Device,
  type ExecutionContext,
  type Model,
  type ModelLoadRequest,
  type NumericDType,
  type ServingProperties,
  type TensorDescriptor,
} from '@kiln/core';
import type { Content } from './frames.js';
import { type PythonModelSettings, resolveModelSettings } from './options.js';
import { PythonWorker } from './python-worker.js';

export const ENGINE_NAME = 'Python';

/** A folder with model.py; every execution context is its own Python process. */
export class PythonModel implements Model {
  readonly engine = ENGINE_NAME;
  readonly device: Device = CPU;
  readonly inputs: readonly TensorDescriptor[] = [];
  readonly outputs: readonly TensorDescriptor[] = [];
  readonly name: string;
  readonly modelDir: string;
  readonly properties: ServingProperties;
  private readonly contexts = new Set<PythonExecutionContext>();

  private constructor(
    request: ModelLoadRequest,
    readonly settings: PythonModelSettings,
    readonly pythonVersion: string,
  ) {
    this.name = request.name;
    this.modelDir = request.modelDir;
    this.properties = request.properties;
  }

  static async load(request: ModelLoadRequest): Promise<PythonModel> {
    const settings = resolveModelSettings(request.options);
    if (!existsSync(join(request.modelDir, settings.entryPoint))) {
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `model ${request.name} has no ${settings.entryPoint} (option.entryPoint)`,
      );
    }
    return new PythonModel(request, settings, await pythonVersionOf(settings.pythonExecutable));
  }

  describe(): Record<string, unknown> {
    return {
      entryPoint: this.settings.entryPoint,
      handler: this.settings.handler,
      pythonExecutable: this.settings.pythonExecutable,
      pythonVersion: this.pythonVersion,
      workers: this.contexts.size,
    };
  }

  async newExecutionContext(): Promise<ExecutionContext> {
    const context = new PythonExecutionContext(this.name, this.modelDir, this.settings, () =>
      this.contexts.delete(context),
    );
    await context.start();
    this.contexts.add(context);
    return context;
  }

  async dispose(): Promise<void> {
    await Promise.all([...this.contexts].map((context) => context.close()));
  }
}

/** One Python process; a dead one is replaced by a fresh one on the next call. */
export class PythonExecutionContext implements ExecutionContext {
  private worker: PythonWorker | undefined;

  constructor(
    private readonly modelName: string,
    private readonly modelDir: string,
    private readonly settings: PythonModelSettings,
    private readonly onClose: () => void,
  ) {}

  async start(): Promise<void> {
    this.worker = await PythonWorker.start({
      modelName: this.modelName,
      modelDir: this.modelDir,
      ...this.settings,
    });
  }

  async forward(input: NDList): Promise<NDList> {
    if (!this.worker?.alive) await this.start();
    const contents = input.tensors.map((tensor, i) =>
      tensorContent(tensor, tensor.name ?? `input${i}`),
    );
    const frame = await this.worker!.call({}, contents);
    const code = Number(frame.properties.code ?? 200);
    if (code >= 400) {
      throw new KilnError(
        code >= 500 ? KilnErrorCode.EngineError : KilnErrorCode.InvalidInput,
        String(frame.properties.message ?? `handler answered ${code}`),
      );
    }
    return new NDList(frame.contents.map(contentTensor));
  }

  async close(): Promise<void> {
    this.onClose();
    await this.worker?.close();
  }
}

function tensorContent(tensor: AnyTensor, name: string): Content {
  if (tensor.dtype === 'string') {
    const text = (tensor.data as string[]).join('');
    return { name, bytes: new TextEncoder().encode(text) };
  }
  return { name, dtype: tensor.dtype, shape: tensor.shape, bytes: bytesOf(tensor.data as never) };
}

function contentTensor(content: Content): AnyTensor {
  if (!content.dtype || content.dtype === 'string') {
    return new Tensor('uint8', content.bytes, [content.bytes.length], content.name);
  }
  const dtype = content.dtype as NumericDType;
  return new Tensor(
    dtype,
    viewBytes(dtype, content.bytes) as never,
    content.shape ?? [],
    content.name,
  );
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
