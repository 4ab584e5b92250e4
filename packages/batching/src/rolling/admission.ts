import type { RollingAdmission } from '@kiln/core';
import type { JobRank } from '../job-queue.js';
import type { GenerationJob } from './generation-job.js';

/** The order a rolling loop's worker takes waiting jobs in (`option.rolling_batch_admission`). */
export type AdmissionPolicy = RollingAdmission;

/** A step's time assumed until the loop has run one. */
const FIRST_STEP_MS = 10;

/**
 * How a policy ranks waiting jobs for the queue (see JobRank); undefined for first come,
 * first served, the queue's own order.
 *
 * `longest_first` takes the job that may generate the most tokens (`max_new_tokens`) first:
 * the longest-processing-time rule. Long generations start early and short ones fill the
 * batch's places as sequences end, so a burst's last tokens come sooner than when its longest
 * requests are admitted last and finish in thinning batches. A job's claim grows by one token
 * for every step it has waited (`stepMs`: the loop's recent step time), so a short job waits
 * at most about as many steps as the longest `max_new_tokens` it sees behind it, never
 * forever. It trades the short requests' time to first token under load for the burst's.
 */
export function admissionRank(
  policy: AdmissionPolicy,
  stepMs: () => number | undefined,
): JobRank<GenerationJob> | undefined {
  if (policy === 'first_come') return undefined;
  return (job, waitedMs) => job.maxNewTokens + waitedMs / Math.max(stepMs() ?? FIRST_STEP_MS, 0.01);
}

/** A step time that follows the recent steps (an exponentially weighted mean). */
export class RecentStepTime {
  private mean: number | undefined;

  constructor(private readonly weight = 0.1) {}

  get ms(): number | undefined {
    return this.mean;
  }

  observe(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    this.mean = this.mean === undefined ? ms : this.mean + this.weight * (ms - this.mean);
  }
}
