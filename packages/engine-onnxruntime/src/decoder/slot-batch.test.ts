import { describe, expect, it } from 'vitest';
import { KvCache } from './kv-cache.js';
import { SlotBatch } from './slot-batch.js';

const LAYERS = 1;
const HEADS = 2;
const HEAD = 2;

/** A cache of `length` positions whose values name the sequence, head and position. */
function cacheOf(sequence: number, length: number): KvCache {
  const cache = new KvCache(LAYERS, HEADS, HEAD);
  cache.reserve(length);
  const present = new Float32Array(HEADS * length * HEAD);
  for (let h = 0; h < HEADS; h++)
    for (let p = 0; p < length; p++)
      present.fill(
        sequence * 1000 + h * 100 + p + 1,
        (h * length + p) * HEAD,
        (h * length + p + 1) * HEAD,
      );
  cache.appendFrom(0, 'key', present, 0, length, 0, length);
  cache.appendFrom(
    0,
    'value',
    present.map((v) => -v),
    0,
    length,
    0,
    length,
  );
  cache.commit(length);
  return cache;
}

/** Row `row`'s first value of each position of head `h` in the batch's keys. */
function positions(batch: SlotBatch, row: number, h: number): number[] {
  const [keys] = batch.pasts();
  const at = (row * HEADS + h) * batch.capacity * HEAD;
  return Array.from({ length: batch.capacity }, (_, p) => keys![at + p * HEAD]!);
}

describe('SlotBatch', () => {
  it('holds each row from its first position, the spare masked as zeros', () => {
    const batch = new SlotBatch(LAYERS, HEADS, HEAD, 511);
    batch.add(7, cacheOf(7, 3));
    batch.add(8, cacheOf(8, 5));
    expect(batch.rows).toBe(2);
    expect(batch.capacity).toBeGreaterThan(5);
    expect(batch.pasts()[0]).toHaveLength(2 * HEADS * batch.capacity * HEAD);
    expect(positions(batch, 0, 1).slice(0, 4)).toEqual([7101, 7102, 7103, 0]);
    expect(positions(batch, 1, 0).slice(0, 6)).toEqual([8001, 8002, 8003, 8004, 8005, 0]);
    expect(batch.pasts()[1]![0]).toBe(-7001);
  });

  it('takes a step’s new position after each row’s last, in place', () => {
    const batch = new SlotBatch(LAYERS, HEADS, HEAD, 511);
    batch.add(1, cacheOf(1, 2));
    batch.add(2, cacheOf(2, 4));
    const before = batch.pasts()[0]!.buffer;
    const fresh = (sign: number) =>
      Float32Array.from({ length: 2 * HEADS * HEAD }, (_, i) => sign * (90 + Math.floor(i / HEAD)));
    batch.advance([fresh(1), fresh(-1)]);
    expect(batch.lengths).toEqual([3, 5]);
    expect(positions(batch, 0, 0).slice(0, 4)).toEqual([1001, 1002, 90, 0]);
    expect(positions(batch, 0, 1).slice(0, 4)).toEqual([1101, 1102, 91, 0]);
    expect(positions(batch, 1, 1).slice(0, 6)).toEqual([2101, 2102, 2103, 2104, 93, 0]);
    expect(batch.pasts()[0]!.buffer).toBe(before);
  });

  it('lets a row go into its own cache, the last row taking its place', () => {
    const batch = new SlotBatch(LAYERS, HEADS, HEAD, 511);
    for (const id of [1, 2, 3]) batch.add(id, cacheOf(id, id + 1));
    const into = new KvCache(LAYERS, HEADS, HEAD);
    batch.remove(1, into);
    expect(batch.ids).toEqual([3, 2]);
    expect(batch.lengths).toEqual([4, 3]);
    expect(positions(batch, 0, 0).slice(0, 5)).toEqual([3001, 3002, 3003, 3004, 0]);
    expect(into.length).toBe(2);
    const back = new SlotBatch(LAYERS, HEADS, HEAD, 511);
    back.add(1, into);
    expect(positions(back, 0, 1).slice(0, 3)).toEqual([1101, 1102, 0]);
    // A released sequence's row is dropped with nowhere to go.
    batch.remove(3);
    expect(batch.ids).toEqual([2]);
    expect(batch.has(3)).toBe(false);
  });

  it('moves every row to more room when the longest fills it, and gives room back when it leaves', () => {
    const batch = new SlotBatch(LAYERS, HEADS, HEAD, 511);
    batch.add(1, cacheOf(1, 2));
    batch.add(2, cacheOf(2, 200));
    const roomy = batch.capacity;
    expect(roomy).toBeGreaterThan(200);
    const fresh = new Float32Array(2 * HEADS * HEAD);
    while (batch.lengths[1]! < roomy) {
      batch.prepare();
      batch.advance([fresh, fresh]);
    }
    batch.prepare();
    expect(batch.capacity).toBeGreaterThan(roomy);
    expect(positions(batch, 0, 0).slice(0, 3)).toEqual([1001, 1002, 0]);
    batch.remove(2);
    batch.prepare();
    expect(batch.capacity).toBeLessThan(40);
    expect(positions(batch, 0, 1).slice(0, 3)).toEqual([1101, 1102, 0]);
  });

  it('never makes room past its limit', () => {
    const batch = new SlotBatch(LAYERS, HEADS, HEAD, 20);
    batch.add(1, cacheOf(1, 10));
    expect(batch.capacity).toBe(20);
  });
});
