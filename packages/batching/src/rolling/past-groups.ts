/**
 * Splits a step's decoding rows into runs of similar past length (the rolling loop's choice,
 * handed to the decoder as each entry's `run`). A run pads every row to its
 * longest past, and reading the padded caches is what a step of a small model costs; each
 * extra run costs a fixed `runCost` (weights read again, per-run overhead), counted in the
 * same unit as padded positions (rows × positions). Sorting by length and cutting where it
 * pays (an O(n²) split of the sorted lengths) gives the cheapest set of runs.
 *
 * Returns groups of indexes into `lengths`, shortest pasts first.
 */
export function groupByPast(lengths: readonly number[], runCost: number): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]!);
  const n = order.length;
  // best[j]: cheapest cost of the first j sorted rows; cut[j]: where its last group starts.
  const best = new Array<number>(n + 1).fill(Infinity);
  const cut = new Array<number>(n + 1).fill(0);
  best[0] = 0;
  for (let j = 1; j <= n; j++) {
    const longest = lengths[order[j - 1]!]! + 1;
    for (let i = 0; i < j; i++) {
      const cost = best[i]! + runCost + (j - i) * longest;
      if (cost < best[j]!) {
        best[j] = cost;
        cut[j] = i;
      }
    }
  }
  const groups: number[][] = [];
  for (let j = n; j > 0; j = cut[j]!) groups.unshift(order.slice(cut[j]!, j));
  return groups;
}
