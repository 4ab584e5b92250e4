/**
 * Byte-pair encoding trained over word frequencies, as SentencePiece's and GPT-2's BPE
 * trainers do: start from each word's characters, repeatedly merge the most frequent adjacent
 * pair (ties broken by the pair's text, so the result never varies), never across words.
 * Returns the merges in rank order; fewer than `maxMerges` when every word is one piece.
 */
export function trainWordBpe(
  words: ReadonlyMap<string, number>,
  maxMerges: number,
): [string, string][] {
  const splits: string[][] = [];
  const counts: number[] = [];
  for (const [word, count] of words) {
    splits.push([...word]);
    counts.push(count);
  }
  const pairs = new Map<string, number>();
  const where = new Map<string, Set<number>>();
  const heap = new PairHeap();
  const changed = new Set<string>();
  const add = (key: string, word: number, count: number) => {
    pairs.set(key, (pairs.get(key) ?? 0) + count);
    let words = where.get(key);
    if (!words) where.set(key, (words = new Set()));
    words.add(word);
    changed.add(key);
  };
  const forEachPair = (s: readonly string[], visit: (key: string) => void) => {
    for (let i = 0; i + 1 < s.length; i++) visit(pairKey(s[i]!, s[i + 1]!));
  };
  splits.forEach((s, w) => forEachPair(s, (key) => add(key, w, counts[w]!)));
  const pushChanged = () => {
    for (const key of changed) heap.push(pairs.get(key)!, key);
    changed.clear();
  };
  pushChanged();

  const merges: [string, string][] = [];
  while (merges.length < maxMerges) {
    const best = heap.popCurrent(pairs);
    if (best === undefined) break;
    const [a, b] = best.split(SEPARATOR) as [string, string];
    merges.push([a, b]);
    const touched = where.get(best)!;
    where.delete(best);
    pairs.delete(best);
    for (const w of touched) {
      const s = splits[w]!;
      const count = counts[w]!;
      // The index may name words that lost this pair to an earlier merge.
      if (!s.some((piece, i) => piece === a && s[i + 1] === b)) continue;
      forEachPair(s, (key) => {
        if (key === best) return;
        pairs.set(key, pairs.get(key)! - count);
        changed.add(key);
      });
      const merged: string[] = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          merged.push(a + b);
          i++;
        } else merged.push(s[i]!);
      }
      splits[w] = merged;
      forEachPair(merged, (key) => add(key, w, count));
    }
    for (const key of changed) if (pairs.get(key) === 0) pairs.delete(key);
    for (const key of [...changed]) if (!pairs.has(key)) changed.delete(key);
    pushChanged();
  }
  return merges;
}

const SEPARATOR = '\u0000';
const pairKey = (a: string, b: string) => `${a}${SEPARATOR}${b}`;

/** A max-heap of (count, pair) that may hold stale counts; popCurrent skips those. */
class PairHeap {
  private readonly counts: number[] = [];
  private readonly keys: string[] = [];

  push(count: number, key: string): void {
    this.counts.push(count);
    this.keys.push(key);
    let i = this.counts.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.above(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** The top pair whose count is still current (and above zero), or undefined. */
  popCurrent(current: ReadonlyMap<string, number>): string | undefined {
    while (this.counts.length > 0) {
      const count = this.counts[0]!;
      const key = this.keys[0]!;
      this.pop();
      if (count > 0 && current.get(key) === count) return key;
    }
    return undefined;
  }

  private pop(): void {
    const last = this.counts.length - 1;
    this.swap(0, last);
    this.counts.pop();
    this.keys.pop();
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let top = i;
      if (left < this.counts.length && this.above(left, top)) top = left;
      if (right < this.counts.length && this.above(right, top)) top = right;
      if (top === i) return;
      this.swap(i, top);
      i = top;
    }
  }

  /** Higher count first; on a tie, the smaller pair text. */
  private above(i: number, j: number): boolean {
    const ci = this.counts[i]!;
    const cj = this.counts[j]!;
    return ci !== cj ? ci > cj : this.keys[i]! < this.keys[j]!;
  }

  private swap(i: number, j: number): void {
    [this.counts[i], this.counts[j]] = [this.counts[j]!, this.counts[i]!];
    [this.keys[i], this.keys[j]] = [this.keys[j]!, this.keys[i]!];
  }
}
