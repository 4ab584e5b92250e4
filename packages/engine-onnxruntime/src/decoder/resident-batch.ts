import type { CacheArray } from './decoder-signature.js';
import type { KvCache } from './kv-cache.js';

/**
 * The KV caches of the last decode batch, kept in the batch tensors ONNX Runtime returned
 * (`present.*`, [rows, heads, past, head], each row right-aligned and left-padded to the
 * longest). A decode step appends one position to every row, so while the next decode
 * step has the same sequences in the same order these tensors are its pasts as they are:
 * no gathering the caches into a batch and no scattering the new positions back.
 */
export class ResidentBatch {
  private readonly rows = new Map<number, number>();
  /** Each row's positions at the end of the past, after padding. */
  readonly align = 'right';

  constructor(
    /** Sequence id of each row. */
    readonly ids: readonly number[],
    /** Filled positions of each row, the last `lengths[row]` of `past`. */
    readonly lengths: number[],
    /** Positions in the tensors, padding included. */
    public past: number,
    /** Per layer: key then value, [rows, heads, past, head]. */
    public tensors: CacheArray[],
    private readonly heads: number,
    private readonly headSize: number,
  ) {
    ids.forEach((id, row) => this.rows.set(id, row));
  }

  /** Nothing to do: the presents a step returns are the next step's pasts as they are. */
  prepare(): void {}

  /** The pasts a step feeds: the last step's presents. */
  pasts(): CacheArray[] {
    return this.tensors;
  }

  /** Values held. */
  get allocatedValues(): number {
    return this.tensors.reduce((n, t) => n + t.length, 0);
  }

  has(id: number): boolean {
    return this.rows.has(id);
  }

  lengthOf(id: number): number | undefined {
    const row = this.rows.get(id);
    return row === undefined ? undefined : this.lengths[row];
  }

  /** Takes the step's presents as the new pasts: every row grew by one position. */
  advance(presents: CacheArray[]): void {
    this.tensors = presents;
    this.past += 1;
    for (let row = 0; row < this.lengths.length; row++) this.lengths[row]! += 1;
  }

  /**
   * Copies sequence `id`'s filled positions of tensor `index` into row `row` of a batch
   * tensor [batch, heads, past, head], right-aligned like KvCache.gatherInto.
   */
  gatherInto(id: number, index: number, target: CacheArray, row: number, past: number): void {
    const from = this.rows.get(id)!;
    const length = this.lengths[from]!;
    const source = this.tensors[index]!;
    const { heads, headSize } = this;
    for (let h = 0; h < heads; h++) {
      const start = ((from * heads + h) * this.past + this.past - length) * headSize;
      const to = ((row * heads + h) * past + past - length) * headSize;
      target.set(source.subarray(start, start + length * headSize), to);
    }
  }

  /** Moves sequence `id`'s positions into its own cache, for when the batch breaks up. */
  moveInto(id: number, cache: KvCache): void {
    const row = this.rows.get(id)!;
    const length = this.lengths[row]!;
    cache.reserve(length);
    this.tensors.forEach((tensor, index) =>
      cache.appendFrom(
        index >> 1,
        index & 1 ? 'value' : 'key',
        tensor,
        row,
        this.past,
        this.past - length,
        length,
      ),
    );
    cache.commit(length);
  }
}
