import type { GenerationJob } from './generation-job.js';

/** A small seeded random source (mulberry32) for workloads that tests and benches repeat. */
export class SeededSource {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, bound). */
  int(bound: number): number {
    return Math.floor(this.next() * bound);
  }

  /** An integer in [low, high]. */
  between(low: number, high: number): number {
    return low + this.int(high - low + 1);
  }

  /** Exponentially distributed with the given mean (gaps of a Poisson process). */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }
}

export interface WorkloadOptions {
  readonly count: number;
  readonly vocab: number;
  readonly maxPrompt: number;
  readonly maxOutput: number;
  readonly minPrompt?: number;
  readonly minOutput?: number;
}

/** Requests with uniformly random prompt tokens, prompt lengths and output lengths. */
export function randomWorkload(random: SeededSource, options: WorkloadOptions): GenerationJob[] {
  return Array.from({ length: options.count }, () => ({
    promptTokens: Array.from(
      { length: random.between(options.minPrompt ?? 1, options.maxPrompt) },
      () => random.int(options.vocab),
    ),
    maxNewTokens: random.between(options.minOutput ?? 1, options.maxOutput),
  }));
}
