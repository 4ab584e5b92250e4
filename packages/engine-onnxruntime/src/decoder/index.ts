export {
  OrtStepDecoder,
  loadOrtStepDecoder,
  type OrtStepDecoderOptions,
  type DecoderLimits,
  type DecoderSequence,
} from './ort-step-decoder.js';
export { readDecoderSignature, type DecoderSignature } from './decoder-signature.js';
export { KvBatchRunner, type KvStepEntry, type RunSession } from './kv-batch-runner.js';
export { withNewKvOutputs, newKvOutputName } from './new-kv-outputs.js';
