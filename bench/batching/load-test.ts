import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { JobMetrics, WorkerPool } from '@kiln/worker-pool';

export interface LoadResult {
  readonly requests: number;
  readonly seconds: number;
  /** Requests answered per second. */
  readonly throughput: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** The main thread's event-loop delay while the load ran. */
  readonly lagP99Ms: number;
  readonly lagMaxMs: number;
  /** Share of the time the main thread's event loop was busy (routing, not waiting). */
  readonly mainThreadBusy: number;
  /** CPU time the main thread spent per request, µs (Linux; undefined elsewhere). */
  readonly mainCpuUsPerRequest: number | undefined;
  /** Time the main thread waited for a core while runnable, ms per second of load (Linux). */
  readonly mainRunQueueMsPerS: number | undefined;
  /** Mean jobs per execution. */
  readonly meanBatch: number;
  /** Every answer, by request index. */
  readonly outputs: readonly unknown[];
}

/** The q-th quantile (0..1) of ascending values. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * Closed-loop load: `concurrency` clients each send their next request as soon as the last
 * is answered, until every request is sent. Latency is submit → answer, per request.
 */
export async function runLoad<I, O>(
  pool: WorkerPool<I, O>,
  inputs: readonly I[],
  concurrency: number,
): Promise<LoadResult> {
  const latencies: number[] = new Array(inputs.length);
  const outputs: O[] = new Array(inputs.length);
  let batches = 0;
  let jobs = 0;
  const onJob = (job: JobMetrics) => {
    jobs++;
    batches += 1 / job.batchSize;
  };
  pool.on('job', onJob);
  const lag = monitorEventLoopDelay({ resolution: 1 });
  let next = 0;
  const client = async () => {
    while (next < inputs.length) {
      const index = next++;
      const sent = performance.now();
      outputs[index] = await pool.predict(inputs[index]!);
      latencies[index] = performance.now() - sent;
    }
  };
  lag.enable();
  const utilization = performance.eventLoopUtilization();
  const scheduled = schedStat();
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, inputs.length) }, client));
  const seconds = (performance.now() - started) / 1000;
  const mainThreadBusy = performance.eventLoopUtilization(utilization).utilization;
  const after = schedStat();
  lag.disable();
  pool.off('job', onJob);
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    requests: inputs.length,
    seconds,
    throughput: inputs.length / seconds,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    lagP99Ms: lag.percentile(99) / 1e6,
    lagMaxMs: lag.max / 1e6,
    mainThreadBusy,
    mainCpuUsPerRequest:
      scheduled && after ? (after.cpuNs - scheduled.cpuNs) / 1e3 / inputs.length : undefined,
    mainRunQueueMsPerS:
      scheduled && after ? (after.waitNs - scheduled.waitNs) / 1e6 / seconds : undefined,
    meanBatch: batches === 0 ? 0 : jobs / batches,
    outputs,
  };
}

/**
 * The calling thread's time on a core and waiting for one, from /proc/thread-self/schedstat
 * (Linux): what the main thread itself costs, apart from how busy the host is.
 */
function schedStat(): { cpuNs: number; waitNs: number } | undefined {
  try {
    const [cpu, wait] = readFileSync('/proc/thread-self/schedstat', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    return cpu === undefined || wait === undefined ? undefined : { cpuNs: cpu, waitNs: wait };
  } catch {
    return undefined;
  }
}
