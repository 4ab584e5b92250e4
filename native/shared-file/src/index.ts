export {
  ADDON_ENV,
  PREBUILDS_ENV,
  addonCandidates,
  loadAddonFrom,
  loadSharedFileAddon,
  type AddonCandidate,
  type AddonLoad,
  type SharedFileAddon,
} from './addon-loader.js';
