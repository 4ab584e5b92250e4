import type { TfApi, TfMemoryInfo } from './tfjs-api.js';

/** This thread's tfjs memory: live tensors, data buffers and their bytes. */
export function memoryOf(tf: TfApi): TfMemoryInfo {
  const { numTensors, numDataBuffers, numBytes } = tf.memory();
  return { numTensors, numDataBuffers, numBytes };
}
