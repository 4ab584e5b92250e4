import {
  ENGINE_SPECIFICATION_VERSION,
  type EngineProvider,
  KilnError,
  KilnErrorCode,
} from '@kiln/core';
import type { DlrEngineSettings } from './dlr-engine.js';
import { ENGINE_NAME } from './engine-name.js';
import { isDlrModelListing } from './model-folder.js';
import { DLR_OPTIONS } from './options.js';

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
    options: DLR_OPTIONS,
    recognizes: isDlrModelListing,
    // The engine's modules are imported here, when a model first needs it.
    load: async () => (await import('./dlr-engine.js')).DlrEngine.load(options),
  };
}

/** The DLR engine with default settings (libdlr from KILN_DLR_LIBRARY or the usual places). */
export const provider: EngineProvider = createDlrEngine();
