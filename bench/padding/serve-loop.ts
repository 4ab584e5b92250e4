import { BatchStats, type BucketKey, JobQueue } from '@kiln/batching';
import type { Predictor } from '@kiln/core';
import type { Encoding } from './sequence-translators.js';
import type { SequenceRequest } from './workload.js';

export interface ServeOptions {
  readonly requests: readonly SequenceRequest[];
  /** One per worker; each runs one batch at a time. */
  readonly predictors: readonly Predictor<SequenceRequest, Encoding>[];
  readonly bucketOf?: (request: SequenceRequest) => BucketKey | undefined;
  readonly batchSize: number;
  readonly maxDelayMs: number;
  /** Clients with a request in flight; each sends its next one when answered. */
  readonly concurrency: number;
  /** Sequence length a batch of these requests is padded to. */
  readonly paddedLength: (requests: readonly SequenceRequest[]) => number;
}

export interface ServeResult {
  readonly seconds: number;
  readonly throughput: number;
  /**
   * Requests per second of CPU time used by the whole process (all its threads): unlike
   * wall-clock throughput it barely moves when other processes share the cores.
   */
  readonly perCpuSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p99: number };
  readonly meanBatchSize: number;
  /** Tokens the model computed per token a request carried. */
  readonly paddingFactor: number;
  /** Each request's answer, in request order. */
  readonly outputs: readonly Encoding[];
}

/**
 * Serves every request through one JobQueue drained by one consumer loop per predictor, with
 * `concurrency` closed-loop clients, and measures what came out.
 */
export async function serve(options: ServeOptions): Promise<ServeResult> {
  const { requests, predictors, batchSize, maxDelayMs, concurrency } = options;
  const queue = new JobQueue<SequenceRequest, Encoding>({
    capacity: concurrency,
    bucketOf: options.bucketOf,
  });
  const stats = new BatchStats(queue);
  let paddedTokens = 0;
  queue.on('batch', (jobs) => {
    paddedTokens += jobs.length * options.paddedLength(jobs.map((job) => job.input));
  });

  const work = async (predictor: Predictor<SequenceRequest, Encoding>) => {
    for (;;) {
      const jobs = await queue.takeBatch({ maxSize: batchSize, maxDelayMs });
      if (jobs.length === 0) return;
      const live = jobs.filter((job) => !job.settled);
      const results = await predictor.batchPredictSettled(live.map((job) => job.input));
      results.forEach((r, i) => (r.ok ? live[i]!.resolve(r.value) : live[i]!.reject(r.error)));
    }
  };
  const workers = predictors.map(work);

  const outputs = new Array<Encoding>(requests.length);
  const latencies: number[] = [];
  let next = 0;
  const client = async () => {
    while (next < requests.length) {
      const index = next++;
      const sent = performance.now();
      outputs[index] = await queue.submit(requests[index]!).result;
      latencies.push(performance.now() - sent);
    }
  };
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  await Promise.all(Array.from({ length: concurrency }, client));
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuStart);
  queue.close();
  await Promise.all(workers);

  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  const realTokens = requests.reduce((sum, r) => sum + r.ids.length, 0);
  return {
    seconds,
    throughput: requests.length / seconds,
    perCpuSecond: requests.length / ((cpu.user + cpu.system) / 1e6),
    latencyMs: { p50: at(0.5), p99: at(0.99) },
    meanBatchSize: stats.snapshot().batchSize.mean,
    paddingFactor: paddedTokens / realTokens,
    outputs,
  };
}
