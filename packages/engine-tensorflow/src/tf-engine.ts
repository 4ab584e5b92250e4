import {
  CPU,
  type Device,
  type Engine,
  KilnError,
  KilnErrorCode,
  type ModelLoadRequest,
  formatDevice,
} from '@kiln/core';
import { BACKEND_INFO } from './runtime/backends.js';
import { TENSORFLOW_ENGINE_NAME, type TfModel, type TfModelLoader } from './tf-model.js';

const GPU0: Device = Object.freeze({ type: 'gpu', id: 0 });

/** The TensorFlow engine: one tfjs backend, chosen when the engine loaded. */
export class TfEngine implements Engine {
  readonly name = TENSORFLOW_ENGINE_NAME;

  constructor(
    private readonly loader: TfModelLoader,
    private readonly threads: Readonly<Record<string, unknown>>,
  ) {}

  /** tfjs-core's version: every backend runs under it. */
  get version(): string {
    return this.loader.facts.tfjsVersion;
  }

  /** cpu, plus gpu0 when native TensorFlow found a CUDA device (it uses the first one). */
  devices(): readonly Device[] {
    return this.loader.facts.gpu ? [CPU, GPU0] : [CPU];
  }

  describe(): Record<string, unknown> {
    const facts = this.loader.facts;
    return {
      backend: facts.backend,
      package: `${facts.packageName}@${facts.packageVersion}`,
      tfjsVersion: facts.tfjsVersion,
      native: BACKEND_INFO[facts.backend].native,
      gpu: facts.gpu,
      ...(facts.simd === undefined ? {} : { simd: facts.simd }),
      multithreaded: facts.multithreaded,
      skipped: facts.skipped,
      models: this.loader.description,
      threads: this.threads,
    };
  }

  loadModel(request: ModelLoadRequest): Promise<TfModel> {
    const supported = this.devices().some(
      (d) => d.type === request.device.type && d.id === request.device.id,
    );
    if (!supported) {
      return Promise.reject(
        new KilnError(
          KilnErrorCode.InvalidConfig,
          `TensorFlow runs on ${this.devices().map(formatDevice).join(', ')} here (backend ${this.loader.facts.backend}), not ${formatDevice(request.device)}` +
            (request.device.type === 'gpu'
              ? `; GPUs need ${BACKEND_INFO['tfjs-node-gpu'].install}`
              : ''),
        ),
      );
    }
    const spec = {
      name: request.name,
      modelDir: request.modelDir,
      modelFile: request.modelFile,
      device: request.device,
      options: request.options,
    };
    return this.loader.loadModel(spec, request);
  }
}
