/**
 * Types of what the compiled addon (`kiln_libtorch.node`) exports. The addon knows nothing of
 * @kiln/core: tensors cross as plain `{ dtype, shape, data }` objects whose `data` is the
 * TypedArray @kiln/core uses for that dtype.
 */

/** A tensor in JavaScript memory. */
export interface HostTensor {
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly data: ArrayBufferView;
}

/** A tensor that stays in LibTorch (on the GPU for CUDA models) until copied out. */
export interface TensorWrap {
  readonly dtype: string;
  readonly shape: number[];
  /** LibTorch's device name: `cpu`, `cuda:0`. */
  readonly device: string;
  readonly disposed: boolean;
  /** Copies the tensor into JavaScript memory. */
  toHost(): Promise<HostTensor>;
  /** Frees the tensor now instead of at garbage collection. Idempotent. */
  dispose(): void;
}

/**
 * A TorchScript value: tensors, arrays (tuples and lists), string-keyed objects (dicts),
 * numbers, booleans, strings and null (None).
 */
export type NativeValue =
  | HostTensor
  | TensorWrap
  | number
  | bigint
  | boolean
  | string
  | null
  | readonly NativeValue[]
  | { readonly [key: string]: NativeValue };

export interface LoadOptions {
  /** LibTorch device name: `cpu` (default), `cuda`, `cuda:1`. */
  device?: string;
  /** Deserialize straight onto `device` (default true); false loads where saved, then moves. */
  mapLocation?: boolean;
  /** Names of extra files stored in the archive to read back. */
  extraFiles?: readonly string[];
  /** Freeze and fuse after loading (torch::jit::optimize_for_inference). */
  optimizeForInference?: boolean;
}

export interface LoadResult {
  readonly module: ModuleWrap;
  /** The requested extra files that the archive holds. */
  readonly extraFiles: Readonly<Record<string, string>>;
}

export interface CompileSpec {
  /** Class name of the module (default KilnModule). */
  name?: string;
  /** TorchScript source defining `forward` (and any other methods). */
  source: string;
  parameters?: Readonly<Record<string, HostTensor>>;
  buffers?: Readonly<Record<string, HostTensor>>;
}

/** Settings put in force on the thread that runs one forward. */
export interface ForwardSettings {
  /** Graph-executor optimizer (thread-local in LibTorch); default true. */
  graphOptimizer?: boolean;
  /** Intra-op threads of the forward's thread; 0 or absent leaves them. */
  numThreads?: number;
  /** oneDNN (MKLDNN), cuDNN and cuDNN benchmark: process-wide; absent leaves them. */
  mkldnn?: boolean;
  cudnn?: boolean;
  cudnnBenchmark?: boolean;
  /** Return tensors as TensorWraps on the model's device instead of copying them out. */
  nativeOutputs?: boolean;
  /** Record every LibTorch operator the forward ran, with its time. */
  recordOps?: boolean;
  /** Return the graph the executor ran. */
  captureGraph?: boolean;
  /**
   * Core pinning (Linux): the forward's thread and its intra-op threads run on these logical
   * CPUs, intra-op thread i on `cpuAffinity[i % length]`; absent leaves them where they are.
   */
  cpuAffinity?: readonly number[];
}

/** What was in force on the forward's thread, read back there after it ran. */
export interface ObservedSettings {
  readonly graphOptimizer: boolean;
  readonly numThreads: number;
  readonly mkldnn: boolean;
  readonly cudnn: boolean;
  readonly cudnnBenchmark: boolean;
  /** A small number naming the thread that ran the forward (1, 2, … in order of first use). */
  readonly thread: number;
  /** The logical CPUs the forward's thread may run on (Linux; empty elsewhere). */
  readonly cpuAffinity: readonly number[];
}

export interface OpRecord {
  readonly name: string;
  readonly depth: number;
  readonly micros: number;
}

export interface ForwardResult {
  readonly value: NativeValue;
  readonly observed: ObservedSettings;
  /** Steady-clock microseconds (one clock for all threads) when the forward started and ended. */
  readonly startedUs: number;
  readonly finishedUs: number;
  readonly ops?: readonly OpRecord[];
  readonly graph?: string;
}

export interface ArgumentDescription {
  readonly name: string;
  /** TorchScript annotation: `Tensor`, `Tuple[Tensor, Tensor]`, `Dict[str, Tensor]`… */
  readonly type: string;
  readonly hasDefault: boolean;
}

export interface ModuleDescription {
  readonly origin: string;
  readonly device: string;
  readonly optimizedForInference: boolean;
  readonly methods: readonly string[];
  readonly forward: {
    readonly schema: string;
    readonly arguments: readonly ArgumentDescription[];
    readonly returns: string;
  };
  readonly parameters: { readonly count: number; readonly bytes: number };
  readonly buffers: { readonly count: number; readonly bytes: number };
}

/**
 * An execution context of a loaded module: shares the module (weights held once) and runs its
 * forwards, one at a time, on a thread of its own, so they keep one OpenMP team.
 */
export interface ContextWrap {
  readonly disposed: boolean;
  /** Runs forward on this context's thread; arguments are copied before it returns. */
  forward(args: readonly NativeValue[], settings?: ForwardSettings): Promise<ForwardResult>;
  /** Releases the thread once running work is done. Idempotent. */
  dispose(): void;
}

export interface ModuleWrap {
  readonly disposed: boolean;
  /**
   * Runs forward off the JavaScript thread, on a thread of its own that ends with it (so no
   * OpenMP team outlives the call); arguments are copied before it returns. Execution contexts
   * (createContext) keep one thread and its team instead.
   */
  forward(args: readonly NativeValue[], settings?: ForwardSettings): Promise<ForwardResult>;
  createContext(): ContextWrap;
  save(path: string, extraFiles?: Readonly<Record<string, string>>): Promise<void>;
  describe(): ModuleDescription;
  dispose(): void;
}

export interface ModuleWrapStatic {
  load(path: string, options?: LoadOptions): Promise<LoadResult>;
  /** Compiles TorchScript source into a module (synchronous; for tooling and tests). */
  compile(spec: CompileSpec): ModuleWrap;
}

export type TensorInput = HostTensor | TensorWrap;

/** Tensor operations run in LibTorch; each resolves the kind of tensor it was given. */
export interface NativeOps {
  softmax<T extends TensorInput>(x: T, dim: number): Promise<T>;
  topk<T extends TensorInput>(x: T, k: number, dim: number, largest: boolean): Promise<[T, T]>;
  argmax<T extends TensorInput>(x: T, dim: number, keepdim: boolean): Promise<T>;
  normalize<T extends TensorInput>(
    x: T,
    mean: readonly number[],
    std: readonly number[],
    dim: number,
  ): Promise<T>;
  resize<T extends TensorInput>(
    x: T,
    height: number,
    width: number,
    options?: {
      mode?: 'nearest' | 'bilinear' | 'bicubic' | 'area';
      alignCorners?: boolean;
      layout?: 'chw' | 'hwc';
    },
  ): Promise<T>;
}

export interface RuntimeInfo {
  readonly version: string;
  readonly cudaCompiled: boolean;
  readonly cudaAvailable: boolean;
  readonly cudaDeviceCount: number;
  readonly cudnnAvailable: boolean;
  readonly mkldnnAvailable: boolean;
  readonly openmp: boolean;
  readonly mkl: boolean;
  /** Kiln dtypes this LibTorch can hold. */
  readonly dtypes: readonly string[];
  readonly buildConfig: string;
  readonly parallelInfo: string;
}

export interface Globals {
  readonly mkldnn: boolean;
  readonly cudnn: boolean;
  readonly cudnnBenchmark: boolean;
  /** Intra-op threads as seen from the calling (JavaScript) thread. */
  readonly numThreads: number;
  readonly numInteropThreads: number;
  /** Graph-executor optimizer of the calling thread. */
  readonly graphOptimizer: boolean;
}

export interface GlobalSettings {
  mkldnn?: boolean;
  cudnn?: boolean;
  cudnnBenchmark?: boolean;
  numThreads?: number;
  numInteropThreads?: number;
}

export interface LibTorchBinding {
  readonly ModuleWrap: ModuleWrapStatic;
  readonly ContextWrap: abstract new (...args: never[]) => ContextWrap;
  readonly TensorWrap: abstract new (...args: never[]) => TensorWrap;
  readonly ops: NativeOps;
  runtimeInfo(): RuntimeInfo;
  getGlobals(): Globals;
  setGlobals(settings: GlobalSettings): void;
}

/** Errors thrown by the addon carry one of @kiln/core's stable codes. */
export interface NativeError extends Error {
  readonly name: 'KilnNativeError';
  readonly code: string;
}

export function isNativeError(value: unknown): value is NativeError {
  return (
    value instanceof Error &&
    value.name === 'KilnNativeError' &&
    typeof (value as { code?: unknown }).code === 'string'
  );
}
