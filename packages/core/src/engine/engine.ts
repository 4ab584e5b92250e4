import type { Device } from './device.js';
import type { Model, ModelLoadRequest } from '../model/model.js';

/** Bumped when the provider/engine contract changes incompatibly. */
export const ENGINE_SPECIFICATION_VERSION = 'kiln-engine-v1' as const;
export type EngineSpecificationVersion = typeof ENGINE_SPECIFICATION_VERSION;

/**
 * How an engine plugs into Kiln. Providers are cheap to construct: nothing native is loaded
 * until the registry calls `load()`.
 */
export interface EngineProvider {
  readonly specificationVersion: EngineSpecificationVersion;
  /** Engine name as DJL spells it in serving.properties: OnnxRuntime, PyTorch, TensorFlow, DLR. */
  readonly name: string;
  /** Higher ranks are preferred when no engine is named. */
  readonly rank: number;
  /**
   * True when forward already runs off the JS thread and all contexts of a model share one
   * loaded copy (LibTorch): servers then run its workers on the main thread around one shared
   * model instead of loading a copy per worker thread.
   */
  readonly sharesLoadedModel?: boolean;
  /** Whether a model folder holding these file names (relative paths) is for this engine. */
  recognizes(fileNames: readonly string[]): boolean;
  /** Loads the engine's runtime. Throws KilnError(ENGINE_UNAVAILABLE) with every place it looked. */
  load(): Promise<Engine>;
}

export interface Engine {
  readonly name: string;
  /** The runtime's own version (e.g. ORT 1.30.0). */
  readonly version: string;
  /** Devices this engine can run on here; always includes cpu. */
  devices(): readonly Device[];
  /** Facts the engine reports about itself (backend chosen, build flags, thread settings…). */
  describe(): Record<string, unknown>;
  loadModel(request: ModelLoadRequest): Promise<Model>;
}
