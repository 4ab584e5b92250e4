export * from './clock.js';
export * from './manual-clock.js';
export type { BucketKey, Job, JobHandle, JobOptions, JobState } from './job.js';
export * from './job-queue.js';
export type { BatchListener, JobEvent, JobListener } from './queue-events.js';
export * from './batch-stats.js';
export type { Summary } from './sample-window.js';
export * from './length-bucketer.js';
export * from './pad-batchifier.js';
