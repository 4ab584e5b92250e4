import type { DType, Device, EngineProvider } from '@kiln/core';

/**
 * Model folders an engine package produces in its own format so that the shared conformance
 * suite can test it. Every method writes a fresh folder under `dir` and returns its path.
 * Folders hold whatever the engine needs (model file, serving.properties with `engine=`).
 */
export interface ConformanceFixtures {
  /**
   * One input `x` of `dtype` with shape [-1, 4]; one output `y` equal to `x` (same dtype and
   * shape). Used for dtype round trips and batching.
   */
  identity(dir: string, dtype: DType): Promise<string>;
  /**
   * Inputs `a` and `b`, float32 [-1, 3]; outputs `sum` = a + b and `product` = a * b, in
   * that order. Used for named and multiple inputs/outputs.
   */
  addMul(dir: string): Promise<string>;
  /** float32 `x` [-1, 4] → float32 `y` [-1, 2] where y = x · weights + bias (weights 4×2). */
  affine(dir: string): Promise<{ dir: string; weights: number[][]; bias: number[] }>;
}

export interface EngineConformanceOptions {
  /** Engine name as registered (OnnxRuntime, PyTorch, TensorFlow, DLR). */
  readonly engineName: string;
  readonly provider: EngineProvider;
  readonly fixtures: ConformanceFixtures;
  /** Dtypes the identity model must round-trip exactly. */
  readonly dtypes: readonly DType[];
  /**
   * Module that exports the same provider as `provider` (named export `provider`), for the
   * worker-thread test; omit only for engines that cannot load in a worker thread.
   */
  readonly providerModule?: URL;
  /** Returns null when the engine can run here, or why not (tests then skip, or fail in CI). */
  readonly probe: () => Promise<string | null>;
  /** Where the models are loaded; the CPU unless given (a GPU run of the same suite). */
  readonly device?: Device;
}
