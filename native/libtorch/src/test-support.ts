// Shared by this package's tests: whether the built addon is here to test.
import { loadLibTorchBinding } from './loader.js';
import type { HostTensor } from './binding.js';

/**
 * Null when the addon loads, else why not. Like @kiln/testing's checkEngine (which this
 * native package does not depend on): KILN_REQUIRE_ENGINES naming PyTorch turns a missing
 * addon into a failure instead of a skip.
 */
export function addonProblem(): string | null {
  try {
    loadLibTorchBinding();
    return null;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const required = (process.env.KILN_REQUIRE_ENGINES ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase());
    if (required.includes('pytorch') || required.includes('*'))
      throw new Error(`PyTorch is required but: ${reason}`);
    console.warn(`[kiln] skipping LibTorch addon tests: ${reason}`);
    return reason;
  }
}

export function f32(values: number[], shape = [values.length]): HostTensor {
  return { dtype: 'float32', shape, data: Float32Array.from(values) };
}
