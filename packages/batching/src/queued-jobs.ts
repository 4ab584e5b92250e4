import type { BucketKey, QueuedJob } from './job.js';
import { LinkedQueue } from './linked-queue.js';

/**
 * The jobs waiting in a queue: one list in arrival order, and one per bucket so the oldest
 * job of a bucket is found in O(1) however many jobs of other buckets are ahead of it.
 */
export class QueuedJobs<I, O> implements Iterable<QueuedJob<I, O>> {
  private readonly order = new LinkedQueue<QueuedJob<I, O>>();
  private readonly buckets = new Map<BucketKey | undefined, LinkedQueue<QueuedJob<I, O>>>();

  get size(): number {
    return this.order.size;
  }

  oldest(): QueuedJob<I, O> | undefined {
    return this.order.peek();
  }

  oldestOf(bucket: BucketKey | undefined): QueuedJob<I, O> | undefined {
    return this.buckets.get(bucket)?.peek();
  }

  add(job: QueuedJob<I, O>): void {
    job.orderNode = this.order.push(job);
    job.bucketNode = this.bucketList(job.bucket).push(job);
  }

  /** Queues a job ahead of every other, in its bucket too. */
  addFirst(job: QueuedJob<I, O>): void {
    job.orderNode = this.order.unshift(job);
    job.bucketNode = this.bucketList(job.bucket).unshift(job);
  }

  remove(job: QueuedJob<I, O>): void {
    if (job.orderNode) this.order.remove(job.orderNode);
    const list = this.buckets.get(job.bucket);
    if (list && job.bucketNode) {
      list.remove(job.bucketNode);
      // Buckets come and go (one per length, say); keep only those holding jobs.
      if (list.size === 0) this.buckets.delete(job.bucket);
    }
    job.orderNode = undefined;
    job.bucketNode = undefined;
  }

  private bucketList(bucket: BucketKey | undefined): LinkedQueue<QueuedJob<I, O>> {
    let list = this.buckets.get(bucket);
    if (!list) this.buckets.set(bucket, (list = new LinkedQueue()));
    return list;
  }

  [Symbol.iterator](): Iterator<QueuedJob<I, O>> {
    return this.order[Symbol.iterator]();
  }
}
