import { loadOrt } from './ort-loader.js';

/** Null when onnxruntime-node loads here, else why not (for checkEngine in tests). */
export async function probeOrt(): Promise<string | null> {
  try {
    await loadOrt();
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
