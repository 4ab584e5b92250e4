import { type CacheArray, type CacheType, cacheArray } from './decoder-signature.js';
import type { KvCache } from './kv-cache.js';

/**
 * The KV caches of one decode run, kept in place from step to step for a decoder that hands
 * back only each run's new positions (see withNewKvOutputs). Per layer, keys then values
 * [row capacity, heads, capacity, head]: each row's positions from the first, the rest
 * masked. A step feeds the first `rows` rows with all `capacity` positions as their past and
 * writes each row's new position after its last, so a steady run copies one position a row;
 * a sequence that joins or leaves moves its own row, and the layout changes (every row
 * copied) only when the capacity no longer fits the longest row.
 */
export class SlotBatch {
  /** Sequence id of each row. */
  readonly ids: number[] = [];
  /** Filled positions of each row. */
  readonly lengths: number[] = [];
  /** Positions each row has room for: the past a step feeds. */
  capacity = 0;
  /** Each row's positions from the first, the spare after them masked. */
  readonly align = 'left';
  private rowCapacity = 0;
  private buffers: CacheArray[];
  private readonly rowOf = new Map<number, number>();

  constructor(
    layers: number,
    private readonly heads: number,
    private readonly headSize: number,
    /** The most positions a step may feed as its past (the model's longest sequence, less one). */
    private readonly limit: number,
    private readonly type: CacheType = 'float32',
  ) {
    this.buffers = Array.from({ length: layers * 2 }, () => cacheArray(type, 0));
  }

  get rows(): number {
    return this.ids.length;
  }

  /** The positions a step feeds as each row's past: all its capacity. */
  get past(): number {
    return this.capacity;
  }

  /** Values held, spare rows and positions included. */
  get allocatedValues(): number {
    return this.buffers.reduce((n, buffer) => n + buffer.length, 0);
  }

  has(id: number): boolean {
    return this.rowOf.has(id);
  }

  lengthOf(id: number): number | undefined {
    const row = this.rowOf.get(id);
    return row === undefined ? undefined : this.lengths[row];
  }

  /** The pasts a step feeds: per layer key then value, [rows, heads, capacity, head]. */
  pasts(): CacheArray[] {
    const values = this.rows * this.heads * this.capacity * this.headSize;
    return this.buffers.map((buffer) => buffer.subarray(0, values));
  }

  /**
   * Makes room for the next step's position in every row, and gives back the spare when the
   * longest row left: either moves every row once to a new capacity.
   */
  prepare(): void {
    const longest = Math.max(0, ...this.lengths);
    if (longest >= this.capacity || this.capacity > this.room(longest) + spare(longest))
      this.relayout(this.rowCapacity, this.room(longest));
  }

  /** Takes sequence `id` in as the last row, its positions copied from its own cache. */
  add(id: number, cache: KvCache): void {
    const row = this.rows;
    if (row === this.rowCapacity || cache.length >= this.capacity)
      this.relayout(
        Math.max(this.rowCapacity, row + 1 + Math.max(2, Math.ceil(row / 4))),
        Math.max(this.capacity, this.room(cache.length)),
      );
    const size = this.heads * this.capacity * this.headSize;
    this.buffers.forEach((buffer, index) => {
      buffer.fill(0, row * size, (row + 1) * size);
      cache.gatherInto(index >> 1, index & 1 ? 'value' : 'key', buffer, row, this.capacity, 0);
    });
    this.ids.push(id);
    this.lengths.push(cache.length);
    this.rowOf.set(id, row);
  }

  /**
   * Lets sequence `id` go, its positions moved into `into` (its own cache) when given; the
   * last row takes its place.
   */
  remove(id: number, into?: KvCache): void {
    const row = this.rowOf.get(id);
    if (row === undefined) return;
    const length = this.lengths[row]!;
    if (into) {
      into.reserve(length);
      this.buffers.forEach((buffer, index) =>
        into.appendFrom(
          index >> 1,
          index & 1 ? 'value' : 'key',
          buffer,
          row,
          this.capacity,
          0,
          length,
        ),
      );
      into.commit(length);
    }
    const last = this.rows - 1;
    if (row !== last) {
      const size = this.heads * this.capacity * this.headSize;
      for (const buffer of this.buffers)
        buffer.copyWithin(row * size, last * size, (last + 1) * size);
      this.ids[row] = this.ids[last]!;
      this.lengths[row] = this.lengths[last]!;
      this.rowOf.set(this.ids[row]!, row);
    }
    this.ids.pop();
    this.lengths.pop();
    this.rowOf.delete(id);
  }

  /**
   * Writes a step's new positions after each row's last: `fresh` per layer key then value,
   * [rows, heads, 1, head].
   */
  advance(fresh: readonly CacheArray[]): void {
    const { heads, headSize, capacity } = this;
    fresh.forEach((source, index) => {
      const target = this.buffers[index]!;
      for (let row = 0; row < this.rows; row++) {
        const at = this.lengths[row]!;
        for (let h = 0; h < heads; h++) {
          const from = (row * heads + h) * headSize;
          target.set(
            source.subarray(from, from + headSize),
            ((row * heads + h) * capacity + at) * headSize,
          );
        }
      }
    });
    for (let row = 0; row < this.rows; row++) this.lengths[row]! += 1;
  }

  /** The capacity for rows of up to `longest` positions: one more, and some to spare. */
  private room(longest: number): number {
    return Math.min(this.limit, longest + 1 + spare(longest));
  }

  /** Moves every row into new buffers of the given room. */
  private relayout(rowCapacity: number, capacity: number): void {
    const { heads, headSize } = this;
    this.buffers = this.buffers.map((old) => {
      const next = cacheArray(this.type, rowCapacity * heads * capacity * headSize);
      for (let row = 0; row < this.rows; row++) {
        const length = this.lengths[row]!;
        for (let h = 0; h < heads; h++) {
          const from = (row * heads + h) * this.capacity * headSize;
          next.set(
            old.subarray(from, from + length * headSize),
            (row * heads + h) * capacity * headSize,
          );
        }
      }
      return next;
    });
    this.rowCapacity = rowCapacity;
    this.capacity = capacity;
  }
}

/**
 * Positions a row has room for beyond the longest: a step attends over all of them (masked),
 * and running out moves every row, so about 1/16 of the longest, at least 16.
 */
function spare(longest: number): number {
  return Math.max(16, Math.ceil(longest / 16));
}
