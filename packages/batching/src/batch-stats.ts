import { KilnError, KilnErrorCode } from '@kiln/core';
import type { JobQueue } from './job-queue.js';
import type { BatchListener, JobEvent, JobListener } from './queue-events.js';
import { SampleWindow, type Summary } from './sample-window.js';

export interface BatchStatsOptions {
  /** Recent samples kept for percentiles; default 1024. */
  window?: number;
}

export interface BatchStatsSnapshot {
  /** Jobs accepted and not yet handed to a worker, now. */
  readonly depth: number;
  /** Highest depth seen. */
  readonly maxDepth: number;
  readonly capacity: number;
  readonly enqueued: number;
  readonly taken: number;
  readonly expired: number;
  readonly cancelled: number;
  readonly rejected: number;
  /** Rejections by error code (QUEUE_FULL, CLOSED, …). */
  readonly rejectedByCode: Readonly<Record<string, number>>;
  readonly batches: number;
  /** Jobs per takeBatch result. */
  readonly batchSize: Summary;
  /** From submit until a worker took the job, ms. */
  readonly queueTimeMs: Summary;
}

/** Collects what the server exposes about one queue: queue time, batch sizes and depth. */
export class BatchStats<I = unknown, O = unknown> {
  private readonly batchSizes: SampleWindow;
  private readonly queueTimes: SampleWindow;
  private readonly counts = { enqueued: 0, taken: 0, expired: 0, cancelled: 0, rejected: 0 };
  private readonly rejectedByCode: Record<string, number> = {};
  private maxDepth = 0;
  private readonly jobListeners: [JobEvent, JobListener<I, O>][];
  private readonly onBatch: BatchListener<I, O>;

  constructor(
    private readonly queue: JobQueue<I, O>,
    options: BatchStatsOptions = {},
  ) {
    const window = options.window ?? 1024;
    if (!Number.isSafeInteger(window) || window < 1) {
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `stats window must be an integer ≥ 1, got ${window}`,
      );
    }
    this.batchSizes = new SampleWindow(window);
    this.queueTimes = new SampleWindow(window);
    this.jobListeners = [
      [
        'enqueued',
        () => {
          this.counts.enqueued++;
          this.maxDepth = Math.max(this.maxDepth, this.queue.depth);
        },
      ],
      [
        'taken',
        (job) => {
          this.counts.taken++;
          this.queueTimes.add(this.queue.clock.now() - job.enqueuedAt);
        },
      ],
      ['expired', () => this.counts.expired++],
      ['cancelled', () => this.counts.cancelled++],
      [
        'rejected',
        (_job, error) => {
          this.counts.rejected++;
          const code = error?.code ?? 'UNKNOWN';
          this.rejectedByCode[code] = (this.rejectedByCode[code] ?? 0) + 1;
        },
      ],
    ];
    this.onBatch = (jobs) => this.batchSizes.add(jobs.length);
    for (const [event, listener] of this.jobListeners) queue.on(event, listener);
    queue.on('batch', this.onBatch);
  }

  snapshot(): BatchStatsSnapshot {
    return {
      depth: this.queue.depth,
      maxDepth: this.maxDepth,
      capacity: this.queue.capacity,
      ...this.counts,
      rejectedByCode: { ...this.rejectedByCode },
      batches: this.batchSizes.summary().count,
      batchSize: this.batchSizes.summary(),
      queueTimeMs: this.queueTimes.summary(),
    };
  }

  /** Stops listening to the queue. */
  detach(): void {
    for (const [event, listener] of this.jobListeners) this.queue.off(event, listener);
    this.queue.off('batch', this.onBatch);
  }
}
