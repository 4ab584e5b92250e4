export { createDlrEngine, provider, type DlrEngineOptions } from './dlr-provider.js';
export { DlrEngine, ENGINE_NAME, type DlrEngineSettings } from './dlr-engine.js';
export { DlrModel, type DlrModelSettings } from './dlr-model.js';
export { DlrExecutionContext } from './dlr-execution-context.js';
export {
  DEVICE_TYPES,
  DLR_OPTION_KEYS,
  parseDlrOptions,
  type DlrModelOptions,
} from './dlr-options.js';
export {
  dlrFolderFiles,
  inspectDlrFolder,
  isDlrModelListing,
  type DlrFolderFiles,
} from './model-folder.js';
export { probeDlr } from './dlr-probe.js';
export { provider as default } from './dlr-provider.js';
