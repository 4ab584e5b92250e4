import type { StepModelInfo } from '@kiln/batching';
import type {
  GenerationFromHost,
  GenerationToHost,
  RollingSettings,
} from './generation-protocol.js';
import type {
  Model,
  PackedOutputs,
  ResolvedModelLoad,
  TensorDescriptor,
  PredictTimings,
  SerializedKilnError,
  ServingInputMessage,
  ServingOutputMessage,
  WorkerKind,
} from '@kiln/core';
import type { PinResult } from './cpu-pinning.js';
import type { ForwardProbe, ForwardProbeRequest } from './forward-probe.js';
import type { WarmupReport } from './warm-up.js';
import type { PriorityResult } from './thread-priority.js';
import type { ThreadPlanRequest } from './thread-budget.js';

/** How a pool's workers build their predictors: everything crosses as plain data. */
export interface ModelRecipe {
  /**
   * The model: a DJL model URL (`mlp::OnnxRuntime=file:///models/mlp`) or a local folder,
   * as `loadModel` accepts it. The pool locates it once, on the calling thread.
   */
  readonly url: string;
  /**
   * Modules that export an engine provider (as `provider` or `default`); the pool and every
   * worker thread import and register them. Package names (`@kiln/engine-onnxruntime`) or
   * file URLs.
   */
  readonly engines: readonly string[];
  /** serving.properties keys that win over the model's own (e.g. `option.optLevel`). */
  readonly overrides?: Readonly<Record<string, string>>;
  /**
   * A module exporting `translatorFactory` for translators written in code; without it the
   * model's serving.properties picks the translator (`resolveTranslator`).
   */
  readonly translator?: string;
  /** Where archives and remote models are unpacked (default: Kiln's cache folder). */
  readonly cacheDir?: string;
  /** Largest archive accepted, in bytes. */
  readonly maxArchiveBytes?: number;
}

/** A recipe resolved once on the main thread: workers load it without locating it again. */
export interface ResolvedRecipe {
  readonly load: ResolvedModelLoad;
  readonly engines: readonly string[];
  readonly translator: string | undefined;
}

/** What one worker on a host thread is started with. */
export interface WorkerInit {
  /**
   * `step`: the worker holds the model's step decoder, its samplers and its streaming
   * detokenizers, and runs the rolling loop over them (see GenerationHost); otherwise a
   * Predictor running batches.
   */
  readonly kind?: WorkerKind;
  readonly recipe: ResolvedRecipe;
  /** Device name as DJL writes it (`cpu`, `gpu0`). */
  readonly device: string;
  /** The pool's side of the thread budget; the worker adds the model's engine options. */
  readonly threads: Omit<ThreadPlanRequest, 'engineOptions'>;
  /** Cores to pin the thread to before the model loads, when pinning is on. */
  readonly pinCores: readonly number[] | undefined;
  /** Why the thread is not pinned although pinning is on (a thread every worker shares). */
  readonly pinRefused?: string;
  /** Steps nicer than the process the thread runs at; 0 leaves its priority alone. */
  readonly nice: number;
  /** Time a full batch once the model is loaded (placement `auto`: see probeForward). */
  readonly probe?: ForwardProbeRequest;
  /** A step worker's rolling loop settings. */
  readonly rolling?: RollingSettings;
}

/** What a model takes and gives, as its engine reports them. */
export interface ModelSignature {
  readonly engine: string;
  readonly inputs: readonly TensorDescriptor[];
  readonly outputs: readonly TensorDescriptor[];
}

export interface WorkerFacts {
  readonly threadId: number | undefined;
  readonly intraOpThreads: number | undefined;
  readonly threadSource: 'settings' | 'user' | 'budget' | undefined;
  readonly pinning: PinResult | undefined;
  readonly priority: PriorityResult | undefined;
  readonly engine: string;
  readonly model: Record<string, unknown>;
  /** The model's inputs and outputs as its engine reports them (for v2 metadata). */
  readonly signature: ModelSignature;
  /** The forward probe's result, when the worker was asked for one. */
  readonly forwardProbe?: ForwardProbe;
  /** What its warm-up ran before it was ready, or why it ran nothing (see warmUp). */
  readonly warmup?: WarmupReport;
  /** A step worker's model: its vocabulary, longest sequence and cache cost. */
  readonly step?: StepModelInfo;
}

export type ResultMessage =
  | { readonly ok: true; readonly value: ServingOutputMessage }
  | { readonly ok: false; readonly error: SerializedKilnError };

/** Main thread → host thread; `worker` names one of the workers the thread hosts. */
export type ToHost =
  | { readonly type: 'start'; readonly worker: number; readonly init: WorkerInit }
  | {
      readonly type: 'run';
      readonly worker: number;
      readonly id: number;
      readonly inputs: readonly ServingInputMessage[];
    }
  | GenerationToHost
  | { readonly type: 'abort'; readonly worker: number; readonly id: number }
  | {
      readonly type: 'end-profiling';
      readonly worker: number;
      readonly id: number;
      readonly skipRuns: number | undefined;
    }
  | { readonly type: 'stop'; readonly worker: number };

/** Host thread → main thread. */
export type FromHost =
  | { readonly type: 'ready'; readonly worker: number; readonly facts: WorkerFacts }
  | { readonly type: 'start-failed'; readonly worker: number; readonly error: SerializedKilnError }
  | {
      readonly type: 'results';
      readonly worker: number;
      readonly id: number;
      /** Answer by answer; empty when `packed` holds them all. */
      readonly results: readonly ResultMessage[];
      /** Every answer at once, when all are plain tensors of one layout (see PackedOutputs). */
      readonly packed?: PackedOutputs;
      readonly timings: PredictTimings | undefined;
    }
  | {
      readonly type: 'run-failed';
      readonly worker: number;
      readonly id: number;
      readonly error: SerializedKilnError;
    }
  | GenerationFromHost
  /** The worker's step decoder can run no more steps (its engine's process died). */
  | { readonly type: 'lost'; readonly worker: number; readonly error: SerializedKilnError }
  | {
      readonly type: 'profile';
      readonly worker: number;
      readonly id: number;
      readonly result: { ok: true; value: unknown } | { ok: false; error: SerializedKilnError };
    }
  | { readonly type: 'stopped'; readonly worker: number };

/** Plain copies of a model's descriptors, safe to post between threads. */
export function signatureOf(model: Model): ModelSignature {
  const plain = (d: TensorDescriptor): TensorDescriptor => ({
    name: d.name,
    ...(d.dtype === undefined ? {} : { dtype: d.dtype }),
    ...(d.shape === undefined ? {} : { shape: [...d.shape] }),
  });
  return {
    engine: model.engine,
    inputs: model.inputs.map(plain),
    outputs: model.outputs.map(plain),
  };
}
