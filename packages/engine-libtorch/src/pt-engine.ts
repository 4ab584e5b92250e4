import { availableParallelism } from 'node:os';
import { CPU, type Device, type Engine, type ModelLoadRequest } from '@kiln/core';
import type { LibTorchBinding, RuntimeInfo } from '@kiln/libtorch-native';
import { toKilnError } from './native.js';
import type { LibTorchEngineOptions } from './options.js';
import { ENGINE_NAME, PtModel } from './pt-model.js';

/** LibTorch as a Kiln engine (DJL's PyTorch engine). */
export class PtEngine implements Engine {
  readonly name = ENGINE_NAME;
  readonly version: string;
  private readonly runtime: RuntimeInfo;

  /**
   * Puts the engine-wide settings in force: the inter-op pool (once per process), the default
   * intra-op team for threads that have not run LibTorch yet, and the backend toggles.
   */
  constructor(
    private readonly binding: LibTorchBinding,
    private readonly options: LibTorchEngineOptions = {},
  ) {
    this.runtime = binding.runtimeInfo();
    this.version = this.runtime.version;
    try {
      binding.setGlobals({
        numInteropThreads: options.numInteropThreads,
        numThreads: options.numThreads ?? availableParallelism(),
        mkldnn: options.useMkldnn,
        cudnn: options.useCudnn,
        cudnnBenchmark: options.cudnnBenchmark,
      });
    } catch (error) {
      throw toKilnError(error);
    }
  }

  devices(): readonly Device[] {
    const gpus = Array.from({ length: this.runtime.cudaDeviceCount }, (_, id): Device => ({
      type: 'gpu',
      id,
    }));
    return [CPU, ...gpus];
  }

  describe(): Record<string, unknown> {
    const { buildConfig: _config, parallelInfo: _parallel, ...runtime } = this.runtime;
    return {
      runtime: 'LibTorch',
      ...runtime,
      globals: this.binding.getGlobals(),
      options: this.options,
    };
  }

  loadModel(request: ModelLoadRequest): Promise<PtModel> {
    return PtModel.load(this.binding, request, this.options);
  }
}
