export * from './engine-requirements.js';
export * from './conformance/random-data.js';
export type { ConformanceFixtures, EngineConformanceOptions } from './conformance/fixtures.js';
