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

/** The q-quantile (0–1) by linear interpolation between the nearest ranks. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const low = Math.floor(position);
  const high = Math.ceil(position);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (position - low);
}

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
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
