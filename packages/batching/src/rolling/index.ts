export * from './generation-job.js';
export * from './rolling-scheduler.js';
export * from './test-workload.js';
export * from './text-generation.js';
