export * from './create-worker-pool.js';
export * from './worker-pool.js';
export * from './generation-pool.js';
export type { ChatTemplateInfo } from './tokenizer-protocol.js';
export * from './settings.js';
export * from './thread-budget.js';
export * from './cpu-pinning.js';
export * from './cpu-topology.js';
export * from './thread-priority.js';
export * from './pool-events.js';
export * from './pool-description.js';
export type { WorkerState, BatchReport } from './pool-worker.js';
export type {
  ModelRecipe,
  ModelSignature,
  ResolvedRecipe,
  WorkerFacts,
} from './worker-protocol.js';
export { startInferenceThread } from './inference-threads.js';
export { endSpareHostThreads, prestartHostThread, spareHostThreads } from './prestart.js';
export type { WorkerBackend, BatchRun } from './worker-backend.js';
export type { ForwardProbe, ForwardProbeRequest } from './forward-probe.js';
export {
  type WarmupReport,
  type WarmupRequest,
  parseWarmupBatchSizes,
  parseWarmupShape,
} from './warm-up.js';
