import { CPU, type Device, type Engine, type ModelLoadRequest } from '@kiln/core';
import { ENGINE_NAME } from './engine-name.js';
import { providerProblem } from './execution-providers.js';
import type { OrtModule } from './ort-loader.js';
import { OrtModel, type OrtModelSettings } from './ort-model.js';
import { DEFAULT_SESSION_CONFIG } from './options.js';

export { ENGINE_NAME };

/** onnxruntime-node as a Kiln engine. */
export class OrtEngine implements Engine {
  readonly name = ENGINE_NAME;
  readonly version: string;

  constructor(
    private readonly ort: OrtModule,
    private readonly settings: OrtModelSettings = {},
  ) {
    this.version = ort.env.versions.node ?? ort.env.versions.common;
  }

  devices(): readonly Device[] {
    return providerProblem(this.ort, 'cuda') === undefined ? [CPU, { type: 'gpu', id: 0 }] : [CPU];
  }

  describe(): Record<string, unknown> {
    return {
      runtime: 'onnxruntime-node',
      version: this.version,
      executionProviders: this.ort.listSupportedBackends().map((b) => ({
        name: b.name,
        available: providerProblem(this.ort, b.name as 'cpu' | 'cuda' | 'tensorrt') === undefined,
      })),
      sessionDefaults: { ...DEFAULT_SESSION_CONFIG, ...this.settings.sessionDefaults },
    };
  }

  loadModel(request: ModelLoadRequest): Promise<OrtModel> {
    return OrtModel.load(request, this.settings);
  }
}
