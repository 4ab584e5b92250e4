export {
  type TensorFlowEngineOptions,
  TENSORFLOW_ENGINE_RANK,
  createTensorFlowEngine,
  provider,
  provider as default,
} from './provider.js';
export { TENSORFLOW_ENGINE_NAME } from './tf-model.js';
export type { TfExecutionContext } from './tf-execution-context.js';
export { TF_BACKENDS, TF_BACKEND_ENV, type TfBackendName } from './runtime/backends.js';
export type { BackendSkip, TfRuntimeFacts } from './runtime/resolve-runtime.js';
export type { TfMemoryInfo } from './runtime/tfjs-api.js';
export { TF_INTER_OP_ENV, TF_INTRA_OP_ENV } from './runtime/thread-settings.js';
export {
  DEFAULT_SAVED_MODEL_SIGNATURE,
  DEFAULT_SAVED_MODEL_TAGS,
  SAVED_MODEL_SIGNATURE_OPTION,
  SAVED_MODEL_TAGS_OPTION,
  TF_OPTIONS,
} from './options.js';
export { fileSystemLoadHandler } from './io/file-system-handler.js';
export { probeTensorFlow } from './probe.js';
