export { createOnnxRuntimeEngine, provider, type OnnxRuntimeEngineOptions } from './provider.js';
export { OrtEngine, ENGINE_NAME } from './ort-engine.js';
export { OrtModel, type OrtModelSettings } from './ort-model.js';
export { OrtExecutionContext } from './ort-execution-context.js';
export type { RunTiming } from './session-runner.js';
export {
  parseSessionConfig,
  toSessionOptions,
  DEFAULT_SESSION_CONFIG,
  SESSION_OPTION_KEYS,
  SESSION_OPTIONS,
  type OrtSessionConfig,
  type OptLevel,
  type ExecutionMode,
  type OrtDevice,
} from './options.js';
export {
  parseProfileTrace,
  bottlenecks,
  type OrtProfile,
  type OrtProfileRow,
  type OrtOpTypeRow,
} from './profiling/ort-profile.js';
export { profileModel, type ProfileModelOptions } from './profiling/profile-model.js';
export { formatProfile } from './profiling/format-profile.js';
export { syntheticInputs, type SyntheticInputOptions } from './profiling/synthetic-inputs.js';
export { loadOrt } from './ort-loader.js';
export { probeOrt } from './probe.js';
export { provider as default } from './provider.js';
export * from './decoder/index.js';
