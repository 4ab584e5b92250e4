export * from './generation-job.js';
export * from './rolling-scheduler.js';
export * from './test-workload.js';
export * from './text-generation.js';
export * from './step-protocol.js';
export * from './sequence-stepper.js';
export * from './rolling-loop.js';
