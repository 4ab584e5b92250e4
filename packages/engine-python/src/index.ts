export { createPythonEngine, provider, type PythonEngineOptions } from './provider.js';
export { PythonEngine } from './python-engine.js';
export { PythonModel, ENGINE_NAME } from './python-model.js';
export {
  PythonServingContext,
  CALL_TIMINGS_CHANNEL,
  type PythonCallTimings,
} from './python-serving-context.js';
export { PythonWorker, PYTHON_PACKAGE_DIR, type PythonWorkerOptions } from './python-worker.js';
export { PythonStepDecoder } from './python-step-decoder.js';
export {
  encodeFrame,
  encodeFrameParts,
  TENSOR_ALIGNMENT,
  decodeFrame,
  FrameReader,
  FrameKind,
  type Frame,
  type Content,
} from './frames.js';
export {
  resolveModelSettings,
  defaultPythonExecutable,
  type PythonModelSettings,
} from './options.js';
export { probePython } from './probe.js';
export { PYTHON_OPTIONS } from './option-declarations.js';
export { provider as default } from './provider.js';
export { requestOf, outputOf, type PythonRequest } from './serving.js';
