import { DlrEngine, type DlrEngineSettings } from './dlr-engine.js';

/** Null when the DLR engine loads here, else why not (for checkEngine in tests). */
export async function probeDlr(settings: DlrEngineSettings = {}): Promise<string | null> {
  try {
    await DlrEngine.load(settings);
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
