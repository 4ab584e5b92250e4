export type {
  DlrAddon,
  DlrCreateRequest,
  DlrDeviceTypeAnswer,
  DlrInputTensor,
  DlrLibraryHandle,
  DlrModelHandle,
  DlrOutputTensor,
  DlrTensorInfo,
} from './native-types.js';
export { DlrNativeError, isDlrNativeError, type DlrNativeErrorLike } from './native-error.js';
export {
  ADDON_ENV,
  addonCandidates,
  loadAddonFrom,
  loadDlrAddon,
  type AddonCandidate,
} from './addon-loader.js';
export {
  LIBRARY_ENV,
  dlrLibraryCandidates,
  dlrLibraryName,
  type LibraryCandidate,
  type LibrarySearchOptions,
} from './library-search.js';
export { openDlrLibrary, type OpenedLibrary } from './open-library.js';
