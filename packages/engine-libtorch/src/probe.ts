import { libtorch } from './native.js';

/** Null when the addon loads here, else why not (a probe for checkEngine in tests). */
export async function probeLibTorch(): Promise<string | null> {
  try {
    libtorch();
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
