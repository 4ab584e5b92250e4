export { createDlrEngine, provider, type DlrEngineOptions } from './provider.js';
export { DlrEngine, ENGINE_NAME, type DlrEngineSettings } from './dlr-engine.js';
export { DlrModel, type DlrModelSettings } from './dlr-model.js';
export { DlrExecutionContext } from './dlr-execution-context.js';
export {
  DEVICE_TYPES,
  DLR_OPTIONS,
  DLR_OPTION_KEYS,
  parseDlrOptions,
  type DlrModelOptions,
} from './options.js';
export {
  dlrFolderFiles,
  inspectDlrFolder,
  isDlrModelListing,
  type DlrFolderFiles,
} from './model-folder.js';
export { probeDlr } from './probe.js';
export { provider as default } from './provider.js';
