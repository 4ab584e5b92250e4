import { quantile } from './figures.js';

export { median, quantile } from './figures.js';

/** A way of running the same work: `call` does one inference of `items` inputs. */
export interface Contender {
  readonly name: string;
  call(): Promise<unknown>;
}

export interface RoundResult {
  /** Per contender: milliseconds per call in this round. */
  readonly msPerCall: Record<string, number>;
}

/**
 * Runs every contender for `calls` calls per round, in an order that rotates each round, so
 * that drift in the machine's load (shared cores, thermal state) hits all of them alike.
 */
export async function interleavedRounds(
  contenders: readonly Contender[],
  rounds: number,
  calls: number,
): Promise<RoundResult[]> {
  const results: RoundResult[] = [];
  for (let round = 0; round < rounds; round++) {
    const msPerCall: Record<string, number> = {};
    for (let k = 0; k < contenders.length; k++) {
      const contender = contenders[(round + k) % contenders.length]!;
      const start = performance.now();
      for (let i = 0; i < calls; i++) await contender.call();
      msPerCall[contender.name] = (performance.now() - start) / calls;
    }
    results.push({ msPerCall });
  }
  return results;
}

/** Quantile over rounds of `f(round)`: ratios are taken within a round, then summarised. */
export function quantileOf(
  results: readonly RoundResult[],
  q: number,
  f: (msPerCall: Record<string, number>) => number,
): number {
  return quantile(
    results.map((r) => f(r.msPerCall)),
    q,
  );
}

export function medianOf(
  results: readonly RoundResult[],
  f: (msPerCall: Record<string, number>) => number,
): number {
  return quantileOf(results, 0.5, f);
}
