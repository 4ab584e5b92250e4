import type { WorkerPool } from '@kiln/worker-pool';
import type { ServerMetrics } from '../metrics/server-metrics.js';

/** Feeds a model pool's measurements into the server's Prometheus metrics. */
export function watchPool(
  metrics: ServerMetrics,
  model: string,
  pool: WorkerPool<unknown, unknown>,
): void {
  const labels = { model };
  pool.on('job', (job) => metrics.queueSeconds.observe(labels, job.queueMs / 1000));
  pool.on('batch', (batch) => {
    metrics.batchSize.observe(labels, batch.batchSize);
    metrics.preprocessSeconds.observe(labels, batch.preprocessMs / 1000);
    metrics.inferenceSeconds.observe(labels, batch.inferenceMs / 1000);
    metrics.postprocessSeconds.observe(labels, batch.postprocessMs / 1000);
  });
}

/** Samples queue depth and worker states just before Prometheus reads them. */
export function sampleGauges(
  metrics: ServerMetrics,
  pools: Iterable<[string, WorkerPool<unknown, unknown>]>,
): void {
  metrics.queueDepth.reset();
  metrics.workers.reset();
  for (const [model, pool] of pools) {
    const stats = pool.stats();
    metrics.queueDepth.set({ model }, stats.queueDepth);
    for (const [state, count] of Object.entries(stats.workers))
      metrics.workers.set({ model, state }, count);
  }
}
