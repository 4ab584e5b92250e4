import { NDList, Tensor } from '@kiln/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { DecoderSignature } from './decoder-signature.js';
import { KvBatchRunner } from './kv-batch-runner.js';
import { KvCache } from './kv-cache.js';
import { ResidentBatch } from './resident-batch.js';
import { newKvOutputName } from './new-kv-outputs.js';
import { DecodeRunCosts } from './run-costs.js';
import { SlotBatch } from './slot-batch.js';

const SIGNATURE: DecoderSignature = {
  layers: 2,
  heads: 2,
  headSize: 4,
  vocabSize: 5,
  useCacheBranch: false,
  logitsToKeep: undefined,
};
const PASTS = SIGNATURE.layers * 2;

/**
 * A decoder session as ONNX Runtime runs one: each present is a fresh tensor holding the
 * past as fed, then the new positions (as the exported graph's Concat makes it). It keeps
 * what each run was fed and what it returned.
 */
function recordingSession() {
  const runs: { pasts: Float32Array[]; presents: Float32Array[] }[] = [];
  const run = async (inputs: NDList): Promise<NDList> => {
    const [batch, fresh] = inputs.get('input_ids').shape as [number, number];
    const pasts: Float32Array[] = [];
    const presents: Float32Array[] = [];
    const out: Tensor[] = [];
    const { heads, headSize } = SIGNATURE;
    for (let index = 0; index < PASTS; index++) {
      const name = `${index >> 1}.${index & 1 ? 'value' : 'key'}`;
      const past = inputs.get(`past_key_values.${name}`);
      const length = past.shape[2]!;
      const present = new Float32Array(batch * heads * (length + fresh) * headSize);
      for (let row = 0; row < batch * heads; row++) {
        const from = (past.data as Float32Array).subarray(
          row * length * headSize,
          (row + 1) * length * headSize,
        );
        present.set(from, row * (length + fresh) * headSize);
        present.fill(runs.length + 1, (row * (length + fresh) + length) * headSize);
        present.fill(0, (row + 1) * (length + fresh) * headSize);
      }
      pasts.push(past.data as Float32Array);
      presents.push(present);
      out.push(
        new Tensor('float32', present, [batch, heads, length + fresh, headSize], `present.${name}`),
      );
    }
    const logits = new Float32Array(batch * fresh * SIGNATURE.vocabSize);
    out.push(new Tensor('float32', logits, [batch, fresh, SIGNATURE.vocabSize], 'logits'));
    runs.push({ pasts, presents });
    return new NDList(out);
  };
  return { run, runs };
}

/**
 * A decoder session that hands back each run's new positions alone when asked (see
 * withNewKvOutputs): position p of a row holds run number × 100 + p, so that the test can
 * tell which run computed what. It keeps what each run was fed and fetched.
 */
function newPositionsSession(extra = 0) {
  const runs: { pasts: Float32Array[]; masks: bigint[][]; fetch: readonly string[] | undefined }[] =
    [];
  const run = async (inputs: NDList, fetch?: readonly string[]): Promise<NDList> => {
    const [batch, fresh] = inputs.get('input_ids').shape as [number, number];
    const { heads, headSize, vocabSize } = SIGNATURE;
    const out: Tensor[] = [];
    const pasts: Float32Array[] = [];
    for (let index = 0; index < PASTS; index++) {
      const layer = index >> 1;
      const kind = index & 1 ? 'value' : 'key';
      pasts.push(inputs.get(`past_key_values.${layer}.${kind}`).data as Float32Array);
      const positions = new Float32Array(batch * heads * (fresh + extra) * headSize);
      for (let p = 0; p < positions.length; p++)
        positions[p] = (runs.length + 1) * 100 + (Math.floor(p / headSize) % (fresh + extra));
      out.push(
        new Tensor(
          'float32',
          positions,
          [batch, heads, fresh + extra, headSize],
          newKvOutputName(layer, kind),
        ),
      );
    }
    const mask = inputs.get('attention_mask');
    const width = mask.shape[1]!;
    const masks = Array.from({ length: batch }, (_, row) => [
      ...(mask.data as BigInt64Array).subarray(row * width, (row + 1) * width),
    ]);
    out.push(
      new Tensor(
        'float32',
        new Float32Array(batch * fresh * vocabSize),
        [batch, fresh, vocabSize],
        'logits',
      ),
    );
    runs.push({ pasts, masks, fetch });
    return new NDList(out);
  };
  return { run, runs };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('KvBatchRunner', () => {
  it('feeds a steady decode batch the presents of its last step as they are, gathering no cache', async () => {
    const session = recordingSession();
    const runner = new KvBatchRunner(session.run, SIGNATURE, 512);
    const ids = [1, 2, 3, 4];
    await runner.step(ids.map((id) => ({ id, tokens: Array.from({ length: id * 3 }, () => 7) })));
    // The first decode step gathers each sequence's cache into the batch once.
    await runner.step(ids.map((id) => ({ id, tokens: [1] })));
    const caches = vi.spyOn(KvCache.prototype, 'gatherInto');
    const residents = vi.spyOn(ResidentBatch.prototype, 'gatherInto');
    const before = session.runs.length;
    for (let step = 0; step < 20; step++) await runner.step(ids.map((id) => ({ id, tokens: [1] })));
    expect(caches).not.toHaveBeenCalled();
    expect(residents).not.toHaveBeenCalled();
    const steady = session.runs.slice(before - 1);
    expect(steady).toHaveLength(21);
    for (let n = 1; n < steady.length; n++)
      for (let index = 0; index < PASTS; index++)
        expect(steady[n]!.pasts[index]).toBe(steady[n - 1]!.presents[index]);
    // A change of company gathers again (so the spies do see gathering).
    runner.release(4);
    await runner.step([1, 2, 3].map((id) => ({ id, tokens: [1] })));
    expect(caches.mock.calls.length + residents.mock.calls.length).toBeGreaterThan(0);
  });

  it('times its decode runs for the run cost it reports, and runs the rows in the runs given', async () => {
    const session = recordingSession();
    const costs = new DecodeRunCosts(Infinity);
    const observed = vi.spyOn(costs, 'observe');
    const runner = new KvBatchRunner(session.run, SIGNATURE, 512, costs);
    // Two young sequences (pasts 2, 3) and two old ones (40, 41).
    const lengths = new Map([
      [1, 2],
      [2, 3],
      [3, 40],
      [4, 41],
    ]);
    await runner.step(
      [...lengths].map(([id, n]) => ({ id, tokens: Array.from({ length: n }, () => 7) })),
    );
    // No runs given: the decode rows run as one.
    const before = session.runs.length;
    await runner.step([1, 2, 3, 4].map((id) => ({ id, tokens: [1] })));
    expect(session.runs.length - before).toBe(1);
    expect(observed).toHaveBeenCalledWith(4, 41, expect.any(Number));
    expect(runner.runCost).toBe(Infinity);

    // The scheduler splits the young from the old: each run padded to its own longest past.
    const split = [1, 2, 3, 4].map((id) => ({ id, tokens: [1], run: id <= 2 ? 0 : 1 }));
    const regrouped = session.runs.length;
    await runner.step(split);
    expect(session.runs.length - regrouped).toBe(2);
    expect(observed).toHaveBeenCalledWith(2, 4, expect.any(Number));
    expect(observed).toHaveBeenCalledWith(2, 42, expect.any(Number));
    // The same runs again run on their own tensors: nothing is gathered.
    const caches = vi.spyOn(KvCache.prototype, 'gatherInto');
    const residents = vi.spyOn(ResidentBatch.prototype, 'gatherInto');
    await runner.step(split);
    expect(caches).not.toHaveBeenCalled();
    expect(residents).not.toHaveBeenCalled();
    expect(observed).toHaveBeenCalledWith(2, 43, expect.any(Number));
  });

  describe('with the new positions as outputs', () => {
    const signature: DecoderSignature = { ...SIGNATURE, newKvOutputs: true };

    it('feeds a steady decode batch its caches in place, masked after each row, fetching only logits and new positions', async () => {
      const session = newPositionsSession();
      const runner = new KvBatchRunner(session.run, signature, 512);
      const ids = [1, 2, 3];
      await runner.step(ids.map((id) => ({ id, tokens: Array.from({ length: id * 2 }, () => 7) })));
      expect(session.runs[0]!.fetch).toEqual([
        'logits',
        ...['0.key', '0.value', '1.key', '1.value'].map((n) => `kiln_new_kv.${n}`),
      ]);
      await runner.step(ids.map((id) => ({ id, tokens: [1] })));
      const caches = vi.spyOn(KvCache.prototype, 'gatherInto');
      const before = session.runs.length;
      for (let step = 0; step < 5; step++)
        await runner.step(ids.map((id) => ({ id, tokens: [1] })));
      expect(caches).not.toHaveBeenCalled();
      const steady = session.runs.slice(before - 1);
      for (const { pasts } of steady.slice(1))
        pasts.forEach((past, index) => expect(past.buffer).toBe(steady[0]!.pasts[index]!.buffer));
      // Row 0 (2 prompt positions, then 6 decoded): filled, masked spare, the new token.
      const { masks } = steady.at(-1)!;
      const width = masks[0]!.length;
      expect(masks[0]!.slice(0, 8)).toEqual(Array.from({ length: 7 }, () => 1n).concat([0n]));
      expect(masks[0]![width - 1]).toBe(1n);
      expect(masks[0]!.filter((m) => m === 1n)).toHaveLength(8);
      // The positions each run computed, in order: the prompt's, then one a decode step.
      const [keys] = steady.at(-1)!.pasts;
      const capacity = (width - 1) as number;
      const row0 = Array.from({ length: 7 }, (_, p) => keys![p * SIGNATURE.headSize]!);
      expect(row0).toEqual([100, 101, 200, 300, 400, 500, 600]);
      expect(keys!.length).toBe(3 * SIGNATURE.heads * capacity * SIGNATURE.headSize);
    });

    it('refuses new positions of another length than it fed, rather than caching them', async () => {
      // A session whose added outputs hold a position more than fed (a present, say).
      const session = newPositionsSession(1);
      const runner = new KvBatchRunner(session.run, signature, 512);
      await expect(runner.step([{ id: 1, tokens: [5, 6] }])).rejects.toMatchObject({
        code: 'ENGINE_ERROR',
        message: expect.stringMatching(/3 new positions a row where 2 were fed/),
      });
    });

    it('moves only the rows that join or leave a run', async () => {
      const session = newPositionsSession();
      const runner = new KvBatchRunner(session.run, signature, 512);
      await runner.step([1, 2, 3].map((id) => ({ id, tokens: [5, 6, 7] })));
      await runner.step([1, 2, 3].map((id) => ({ id, tokens: [1] })));
      const added = vi.spyOn(SlotBatch.prototype, 'add');
      const removed = vi.spyOn(SlotBatch.prototype, 'remove');
      runner.release(2);
      await runner.step([4].map((id) => ({ id, tokens: [5, 6] })));
      await runner.step([1, 3, 4].map((id) => ({ id, tokens: [1] })));
      expect(removed.mock.calls.map(([id]) => id)).toEqual([2]);
      expect(added.mock.calls.map(([id]) => id)).toEqual([4]);
      // Each sequence still sees its own positions: 3 prompt, then its decoded ones.
      const last = session.runs.at(-1)!;
      expect(last.masks.map((m) => m.filter((v) => v === 1n).length)).toEqual([5, 5, 3]);
      expect(runner.allocatedValues).toBeGreaterThan(0);
    });
  });
});
