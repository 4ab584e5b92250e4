export * from './engine-requirements.js';
export * from './conformance/random-data.js';
export type { ConformanceFixtures, EngineConformanceOptions } from './conformance/fixtures.js';
export { onnxConformanceFixtures } from './fixtures/onnx.js';
export * from './fixtures/tfjs.js';
export * from './fixtures/torchscript.js';
export * from './fixtures/dlr.js';
export * from './collect-garbage.js';
export * from './resident-bytes.js';
