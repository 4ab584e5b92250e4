export { createLibTorchEngine, provider } from './provider.js';
export { PtEngine } from './pt-engine.js';
export { PtModel, ENGINE_NAME, torchDevice } from './pt-model.js';
export { PtExecutionContext, type ForwardValuesOptions } from './pt-execution-context.js';
export {
  type LibTorchEngineOptions,
  type PtModelSettings,
  PT_OPTION_KEYS,
  PT_OPTIONS,
  resolveModelSettings,
  engineOptionsFromEnv,
} from './options.js';
export { ptOps, type TopKOptions, type ResizeOptions } from './pt-ops.js';
export { compileScriptModule, saveScriptModule, type ScriptModuleSpec } from './script-module.js';
export { type PtSignature, SIGNATURE_FILE } from './signature.js';
export { parseWarmup } from './warmup.js';
export { probeLibTorch } from './probe.js';
export { provider as default } from './provider.js';
