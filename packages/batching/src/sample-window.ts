/** Count, mean and extremes since the start; percentiles over the most recent samples. */
export interface Summary {
  readonly count: number;
  readonly mean: number;
  readonly min: number;
  readonly max: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
}

/**
 * Keeps running totals of every sample and the last `size` samples in a ring, so memory stays
 * fixed however long a server runs while percentiles follow recent behaviour.
 */
export class SampleWindow {
  private readonly ring: Float64Array;
  private count = 0;
  private sum = 0;
  private min = Infinity;
  private max = -Infinity;

  constructor(size: number) {
    this.ring = new Float64Array(size);
  }

  add(value: number): void {
    this.ring[this.count % this.ring.length] = value;
    this.count++;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }

  summary(): Summary {
    if (this.count === 0) return { count: 0, mean: 0, min: 0, max: 0, p50: 0, p90: 0, p99: 0 };
    const recent = this.ring.slice(0, Math.min(this.count, this.ring.length)).sort();
    const at = (q: number) => recent[Math.min(recent.length - 1, Math.floor(q * recent.length))]!;
    return {
      count: this.count,
      mean: this.sum / this.count,
      min: this.min,
      max: this.max,
      p50: at(0.5),
      p90: at(0.9),
      p99: at(0.99),
    };
  }
}
