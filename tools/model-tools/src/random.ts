/**
 * A seeded pseudo-random source (mulberry32), so that every generated model and every
 * training run is byte-for-byte reproducible.
 */
export class SeededRandom {
  private state: number;
  private spareNormal: number | undefined;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform in [low, high). */
  uniform(low: number, high: number): number {
    return low + (high - low) * this.next();
  }

  /** An integer in [0, bound). */
  int(bound: number): number {
    return Math.floor(this.next() * bound);
  }

  /** Normally distributed (Box–Muller, both values used). */
  normal(mean = 0, std = 1): number {
    if (this.spareNormal !== undefined) {
      const value = this.spareNormal;
      this.spareNormal = undefined;
      return mean + std * value;
    }
    const u = 1 - this.next();
    const v = this.next();
    const radius = Math.sqrt(-2 * Math.log(u));
    this.spareNormal = radius * Math.sin(2 * Math.PI * v);
    return mean + std * radius * Math.cos(2 * Math.PI * v);
  }

  /** `size` normal values as float32. */
  normalArray(size: number, std: number, mean = 0): Float32Array {
    const out = new Float32Array(size);
    for (let i = 0; i < size; i++) out[i] = this.normal(mean, std);
    return out;
  }

  /** `size` uniform values in [low, high) as float32. */
  uniformArray(size: number, low: number, high: number): Float32Array {
    const out = new Float32Array(size);
    for (let i = 0; i < size; i++) out[i] = this.uniform(low, high);
    return out;
  }

  /** Fisher–Yates shuffle of a copy. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }
}
