import { type CacheArray, type CacheType, cacheArray } from './decoder-signature.js';

/**
 * One sequence's keys and values, per layer laid out [heads, capacity, head] so that a
 * head's positions are contiguous. Grows by doubling; `length` positions are filled.
 */
export class KvCache {
  length = 0;
  private capacity = 0;
  private keys: CacheArray[];
  private values: CacheArray[];

  constructor(
    readonly layers: number,
    readonly heads: number,
    readonly headSize: number,
    readonly type: CacheType = 'float32',
  ) {
    this.keys = Array.from({ length: layers }, () => cacheArray(type, 0));
    this.values = Array.from({ length: layers }, () => cacheArray(type, 0));
  }

  /** Values held (of `type`), including spare capacity. */
  get allocatedValues(): number {
    return this.layers * 2 * this.heads * this.capacity * this.headSize;
  }

  /**
   * Copies this cache into row `row` of a batch tensor [batch, heads, past, head], from
   * position `offset`: by default right aligned, a shorter cache leaving its first positions
   * as padding.
   */
  gatherInto(
    layer: number,
    kind: 'key' | 'value',
    target: CacheArray,
    row: number,
    past: number,
    offset = past - this.length,
  ): void {
    const source = (kind === 'key' ? this.keys : this.values)[layer]!;
    const { heads, headSize, capacity, length } = this;
    for (let h = 0; h < heads; h++) {
      const from = h * capacity * headSize;
      const to = ((row * heads + h) * past + offset) * headSize;
      target.set(source.subarray(from, from + length * headSize), to);
    }
  }

  /**
   * Appends `count` positions from row `row` of a present tensor [batch, heads, total,
   * head], starting at position `start`.
   */
  appendFrom(
    layer: number,
    kind: 'key' | 'value',
    present: CacheArray,
    row: number,
    total: number,
    start: number,
    count: number,
  ): void {
    const { heads, headSize, capacity, length } = this;
    const target = (kind === 'key' ? this.keys : this.values)[layer]!;
    for (let h = 0; h < heads; h++) {
      const from = ((row * heads + h) * total + start) * headSize;
      target.set(
        present.subarray(from, from + count * headSize),
        (h * capacity + length) * headSize,
      );
    }
  }

  /** Frees the positions, e.g. when a resident batch holds them instead. */
  clear(): void {
    this.length = 0;
    this.capacity = 0;
    this.keys = this.keys.map(() => cacheArray(this.type, 0));
    this.values = this.values.map(() => cacheArray(this.type, 0));
  }

  /** Marks `count` appended positions (on every layer) as filled. */
  commit(count: number): void {
    this.length += count;
  }

  /** Makes room for `extra` more positions; call before appending. */
  reserve(extra: number): void {
    const needed = this.length + extra;
    if (needed <= this.capacity) return;
    const capacity = Math.max(needed, this.capacity * 2, 16);
    const { heads, headSize, length } = this;
    const grow = (old: CacheArray) => {
      const next = cacheArray(this.type, heads * capacity * headSize);
      for (let h = 0; h < heads; h++)
        next.set(
          old.subarray(h * this.capacity * headSize, (h * this.capacity + length) * headSize),
          h * capacity * headSize,
        );
      return next;
    };
    this.keys = this.keys.map(grow);
    this.values = this.values.map(grow);
    this.capacity = capacity;
  }
}
