/** A model input or output as DLR describes it: TVM's type name, -1 for a dynamic dimension. */
export interface DlrTensorInfo {
  readonly name: string;
  /** TVM's spelling: `float32`, `int64`, `uint8`, `bool`… */
  readonly type: string;
  readonly shape: readonly number[];
}

/** One input of `run()`. `data` holds exactly the shape's elements, little-endian. */
export interface DlrInputTensor {
  readonly name: string;
  readonly type: string;
  readonly shape: readonly number[];
  readonly data: ArrayBufferView;
}

/** One output of `run()`: a fresh buffer the caller owns. */
export interface DlrOutputTensor {
  readonly name: string;
  readonly type: string;
  readonly shape: number[];
  readonly data: ArrayBuffer;
}

export interface DlrCreateRequest {
  /** The model folder, or DLR's colon-separated list of folders and files. */
  readonly modelPath: string;
  /** DLPack device type: 1 cpu, 2 cuda, 4 opencl, 7 vulkan, 8 metal, 10 rocm. Default 1. */
  readonly deviceType?: number;
  readonly deviceId?: number;
  /** Threads for this handle (DLR's SetDLRNumThreads); 0 or absent leaves DLR's default. */
  readonly numThreads?: number;
}

/** What GetDLRDeviceType says about a model folder; -1 with `error` when it cannot tell. */
export interface DlrDeviceTypeAnswer {
  readonly deviceType: number;
  readonly error: string | null;
}

/**
 * One DLR model handle (native). DLR's runtime is not thread-safe: a handle runs one call at a
 * time, and a second `run()` or `dispose()` while one is in flight throws PREDICTOR_BUSY.
 */
export interface DlrModelHandle {
  readonly inputs: readonly DlrTensorInfo[];
  readonly outputs: readonly DlrTensorInfo[];
  /** False when the model has no DLR metadata file: outputs are then named `output_<i>`. */
  readonly outputNamesKnown: boolean;
  /** DLR's backend name (`tvm`, `relayvm`…), or null when this DLR does not say. */
  readonly backend: string | null;
  readonly busy: boolean;
  readonly disposed: boolean;
  /** Async: inputs are copied before it returns; DLR runs off the JavaScript thread. */
  run(inputs: readonly DlrInputTensor[]): Promise<DlrOutputTensor[]>;
  /** Async, idempotent: deletes the handle. */
  dispose(): Promise<void>;
}

/** An opened libdlr (native). Stays loaded for the life of the process. */
export interface DlrLibraryHandle {
  readonly path: string;
  /** DLR's version, or null when the library does not report one. */
  readonly version: string | null;
  /** Optional DLR functions this library lacks (older DLR releases). */
  readonly missingOptional: readonly string[];
  createModel(request: DlrCreateRequest): Promise<DlrModelHandle>;
  deviceTypeOf(modelPath: string): Promise<DlrDeviceTypeAnswer>;
}

/** The addon's exports (build/Release/kiln_dlr.node). */
export interface DlrAddon {
  openLibrary(path: string): Promise<DlrLibraryHandle>;
  /** Sets TVM_NUM_THREADS in the process environment unless set; returns the value in force. */
  defaultTvmThreads(threads: number): string;
}
