import {
  ENGINE_SPECIFICATION_VERSION,
  type EngineProvider,
  KilnError,
  KilnErrorCode,
} from '@kiln/core';
import { DlrEngine, type DlrEngineSettings, ENGINE_NAME } from './dlr-engine.js';
import { isDlrModelListing } from './model-folder.js';

export interface DlrEngineOptions extends DlrEngineSettings {
  /** Preference when no engine is named; 1 by default (DLR folders are recognized by their files). */
  readonly rank?: number;
}

/** A provider for the DLR engine; nothing native is loaded until `load()`. */
export function createDlrEngine(options: DlrEngineOptions = {}): EngineProvider {
  const threads = options.defaultThreads;
  if (threads !== undefined && (!Number.isInteger(threads) || threads < 1 || threads > 4096)) {
    throw new KilnError(
      KilnErrorCode.InvalidConfig,
      `defaultThreads must be an integer within 1..4096, got ${threads}`,
    );
  }
  return {
    specificationVersion: ENGINE_SPECIFICATION_VERSION,
    name: ENGINE_NAME,
    rank: options.rank ?? 1,
    recognizes: isDlrModelListing,
    load: () => DlrEngine.load(options),
  };
}

/** The DLR engine with default settings (libdlr from KILN_DLR_LIBRARY or the usual places). */
export const provider: EngineProvider = createDlrEngine();
