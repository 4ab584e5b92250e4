import type { Device } from './device.js';
import type { Model, ModelLoadRequest } from '../model/model.js';
import type { SettingDeclaration } from '../settings/setting-declaration.js';

/** Bumped when the provider/engine contract changes incompatibly. */
export const ENGINE_SPECIFICATION_VERSION = 'kiln-engine-v1' as const;
export type EngineSpecificationVersion = typeof ENGINE_SPECIFICATION_VERSION;

/**
 * What a model's workers run; the engine's provider lists the kinds it supports, and the
 * model's settings pick one (see `workerKindFor`):
 * - `forward`: batches of tensors (`NDList`) through a Predictor — tensor engines;
 * - `serve`: request-level DJL Input/Output, each request's properties and contents as they
 *   came — Python mode's handlers;
 * - `step`: one decoding step over many sequences, driven by the rolling scheduler —
 *   text generation (`option.rolling_batch`).
 */
export type WorkerKind = 'forward' | 'serve' | 'step';

/** See EngineProvider.execution. */
export type EngineExecution = 'blocking' | 'async';

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
   * How the engine's forward runs; only the worker pool reads it. `'blocking'` (default): it
   * blocks the calling thread (DJL's synchronous predictor), so the pool runs each worker on
   * a thread of its own. `'async'`: it already runs off the JavaScript thread (native workers,
   * processes), so the pool loads the model once and its workers share it on the main thread.
   */
  readonly execution?: EngineExecution;
  /**
   * `'shared'` when the engine loads in only one thread per process (tfjs-node): the pool
   * then hosts every worker of this engine, of every model, on one thread.
   */
  readonly hostThread?: 'per-worker' | 'shared';
  /**
   * The `option.*` keys of serving.properties this engine reads (prefix removed). Declared,
   * another key is a warning naming the closest one; undeclared, keys go unchecked.
   */
  readonly options?: readonly SettingDeclaration[];
  /**
   * True when every serving.properties key reaches the model's own code (Python mode's
   * handler gets them as its properties): keys not declared are then not unknown.
   */
  readonly passesSettingsToModel?: boolean;
  /** What this engine's workers can run; default `['forward']`. See WorkerKind. */
  readonly workerKinds?: readonly WorkerKind[];
  /**
   * serving.properties keys the model's own files imply, for where its settings leave them
   * out (a Hugging Face decoder folder: `option.rolling_batch=auto`, text generation).
   * Cheap: it reads a few bytes of the files, and loads no runtime.
   */
  impliedSettings?(
    modelDir: string,
    fileNames: readonly string[],
  ): Promise<Readonly<Record<string, string>>>;
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
