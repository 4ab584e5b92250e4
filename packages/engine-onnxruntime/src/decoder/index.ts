export { OrtStepDecoder, type OrtStepDecoderOptions } from './ort-step-decoder.js';
export { readDecoderSignature, type DecoderSignature } from './decoder-signature.js';
export { KvCache } from './kv-cache.js';
