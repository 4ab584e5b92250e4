import type { AnyTensor } from '@kiln/core';
import type { HostTensor } from '@kiln/libtorch-native';
import { fromHostTensor, toHostTensor } from './tensor-bridge.js';
import { libtorch, native } from './native.js';

export interface TopKOptions {
  /** Dimension to search (default -1, the last). */
  dim?: number;
  /** Largest (default) or smallest k. */
  largest?: boolean;
}

export interface ResizeOptions {
  /** Interpolation (default bilinear). */
  mode?: 'nearest' | 'bilinear' | 'bicubic' | 'area';
  alignCorners?: boolean;
  /** `chw` (CHW / NCHW, default) or `hwc` (HWC / NHWC, as decoded images are). */
  layout?: 'chw' | 'hwc';
}

/**
 * Tensor operations for translators, run in LibTorch off the JavaScript thread on core
 * tensors. Results keep the input's name.
 */
export const ptOps = {
  async softmax(x: AnyTensor, dim = -1): Promise<AnyTensor> {
    return run(x, (t) => libtorch().ops.softmax(t, dim));
  },

  /** The k largest (or smallest) values along `dim`, sorted, with their int64 indices. */
  async topK(
    x: AnyTensor,
    k: number,
    options: TopKOptions = {},
  ): Promise<{ values: AnyTensor; indices: AnyTensor }> {
    const [values, indices] = await native(() =>
      libtorch().ops.topk(toHostTensor(x), k, options.dim ?? -1, options.largest ?? true),
    );
    return { values: fromHostTensor(values, x.name), indices: fromHostTensor(indices, x.name) };
  },

  /** int64 indices of the largest values along `dim`. */
  async argmax(x: AnyTensor, dim = -1, keepDim = false): Promise<AnyTensor> {
    return run(x, (t) => libtorch().ops.argmax(t, dim, keepDim));
  },

  /**
   * (x - mean[c]) / std[c] along the channel dimension `dim` (default: 0 for CHW, 1 for NCHW).
   * Integer tensors (raw pixels) come back float32.
   */
  async normalize(
    x: AnyTensor,
    mean: readonly number[],
    std: readonly number[],
    dim = x.rank === 4 ? 1 : 0,
  ): Promise<AnyTensor> {
    return run(x, (t) => libtorch().ops.normalize(t, mean, std, dim));
  },

  /** Resizes a rank-3 or rank-4 image tensor to height × width. */
  async resize(
    x: AnyTensor,
    height: number,
    width: number,
    options: ResizeOptions = {},
  ): Promise<AnyTensor> {
    return run(x, (t) => libtorch().ops.resize(t, height, width, options));
  },
};

async function run(x: AnyTensor, op: (t: HostTensor) => Promise<HostTensor>): Promise<AnyTensor> {
  const host = toHostTensor(x);
  return fromHostTensor(await native(() => op(host)), x.name);
}
