import { KilnError, KilnErrorCode } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { BatchStats } from './batch-stats.js';
import { JobQueue } from './job-queue.js';
import { ManualClock } from './manual-clock.js';
import { rejectionCode } from './test-support/promises.js';

describe('BatchStats', () => {
  it('measures queue time per job, batch size per takeBatch and queue depth', async () => {
    const clock = new ManualClock();
    const queue = new JobQueue<string, string>({ clock, capacity: 3 });
    const stats = new BatchStats(queue);

    queue.submit('a'); // t=0
    clock.advance(10);
    queue.submit('b'); // t=10
    queue.submit('c'); // t=10
    const full = queue.submit('d');
    expect(await rejectionCode(full.result)).toBe(KilnErrorCode.QueueFull);
    clock.advance(30);
    const first = await queue.takeBatch({ maxSize: 2, maxDelayMs: 0 }); // a waited 40, b 30
    const second = await queue.takeBatch({ maxSize: 2, maxDelayMs: 0 }); // c waited 30
    for (const job of [...first, ...second]) job.resolve('ok');

    const snapshot = stats.snapshot();
    expect(snapshot).toMatchObject({
      depth: 0,
      maxDepth: 3,
      capacity: 3,
      enqueued: 3,
      taken: 3,
      rejected: 1,
      rejectedByCode: { QUEUE_FULL: 1 },
      batches: 2,
    });
    expect(snapshot.batchSize).toMatchObject({ count: 2, mean: 1.5, min: 1, max: 2 });
    expect(snapshot.queueTimeMs).toMatchObject({ count: 3, min: 30, max: 40, p50: 30 });
    expect(snapshot.queueTimeMs.mean).toBeCloseTo(100 / 3);
  });

  it('counts expired and cancelled jobs, and stops counting once detached', async () => {
    const clock = new ManualClock();
    const queue = new JobQueue<string, string>({ clock });
    const stats = new BatchStats(queue);
    const expiring = queue.submit('a', { timeoutMs: 5 });
    const cancelled = queue.submit('b');
    cancelled.cancel();
    clock.advance(5);
    expect(
      await Promise.all([rejectionCode(expiring.result), rejectionCode(cancelled.result)]),
    ).toEqual([KilnErrorCode.Timeout, KilnErrorCode.Cancelled]);
    expect(stats.snapshot()).toMatchObject({ expired: 1, cancelled: 1, depth: 0 });

    stats.detach();
    queue.close(new KilnError(KilnErrorCode.Closed, 'bye'));
    expect(await rejectionCode(queue.submit('c').result)).toBe(KilnErrorCode.Closed);
    expect(stats.snapshot().rejected).toBe(0);
  });

  it('computes percentiles over a bounded window of recent samples', async () => {
    const clock = new ManualClock();
    const queue = new JobQueue<number, void>({ clock });
    const stats = new BatchStats(queue, { window: 10 });
    for (let i = 0; i < 100; i++) {
      queue.submit(i);
      clock.advance(i); // job i waits i ms
      const [job] = await queue.takeBatch({ maxSize: 1, maxDelayMs: 0 });
      job!.resolve();
    }
    const { queueTimeMs } = stats.snapshot();
    expect(queueTimeMs).toMatchObject({ count: 100, min: 0, max: 99, p50: 95, p99: 99 });
    expect(queueTimeMs.mean).toBeCloseTo(49.5);
  });

  it('refuses an invalid window', () => {
    expect(() => new BatchStats(new JobQueue(), { window: 0 })).toThrow(
      expect.objectContaining({ code: KilnErrorCode.InvalidConfig }),
    );
  });
});
