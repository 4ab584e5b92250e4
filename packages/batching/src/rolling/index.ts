export * from './generation-job.js';
export * from './test-workload.js';
export * from './step-protocol.js';
export * from './sequence-stepper.js';
export * from './rolling-loop.js';
export * from './past-groups.js';
export * from './admission.js';
