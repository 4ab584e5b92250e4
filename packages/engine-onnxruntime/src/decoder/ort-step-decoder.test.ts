import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KilnError } from '@kiln/core';
import { gptDecoderModel, tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeOrt } from '../probe.js';
import { loadOrtModel } from '../test-support/load.js';
import {
  type DecoderSequence,
  type OrtStepDecoder,
  loadOrtStepDecoder,
} from './ort-step-decoder.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

let root: string;
let decoder: OrtStepDecoder;
let model: { dir: string };
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-decoder-'));
  if (!run) return;
  model = await gptDecoderModel(join(root, 'gpt'), {
    layers: 2,
    hidden: 32,
    heads: 4,
    maxLen: 128,
  });
  decoder = await loadOrtStepDecoder(model.dir, { session: { intraOpNumThreads: 1 } });
});
afterAll(async () => {
  await decoder?.close();
  await rm(root, { recursive: true, force: true });
});

const tokens = (n: number, seed: number) =>
  Array.from({ length: n }, (_, i) => (i * 7 + seed) % 97);

/** Feeds `chunks` one step at a time to a fresh sequence; answers each step's logits. */
async function feedAlone(chunks: readonly number[][]): Promise<Float32Array[]> {
  const state = decoder.open();
  const out: Float32Array[] = [];
  for (const chunk of chunks) out.push((await decoder.step([{ state, tokens: chunk }]))[0]!);
  decoder.release(state);
  return out;
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  return a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);
}

describe.skipIf(!run)('OrtStepDecoder', () => {
  it('reads the decoder signature and the limits from config.json', () => {
    expect(decoder.signature).toEqual({
      layers: 2,
      heads: 4,
      headSize: 8,
      vocabSize: 97,
      useCacheBranch: false,
      logitsToKeep: undefined,
      cacheType: 'float32',
      newKvOutputs: true,
    });
    expect(decoder.maxSequenceLength).toBe(128);
    expect(decoder.eosTokenId).toBe(0);
    expect(decoder.cacheBytesPerToken).toBe(2 * 2 * 4 * 8 * 4);
  });

  it('continues from its cache as if it had seen the whole sequence at once', async () => {
    const prompt = tokens(20, 3);
    const [whole] = await feedAlone([prompt]);
    const pieces = await feedAlone([prompt.slice(0, 9), prompt.slice(9, 19), prompt.slice(19)]);
    expect(maxDiff(whole!, pieces[2]!)).toBeLessThan(1e-4);
  });

  it('gives each sequence of a padded, mixed batch the logits it gets alone', async () => {
    const prompts = [tokens(1, 1), tokens(13, 2), tokens(40, 5)];
    const alone = await Promise.all([0, 1, 2].map(async (i) => feedAlone([prompts[i]!, [4], [9]])));
    const states: DecoderSequence[] = prompts.map(() => decoder.open());
    // Step 1: all prefill, unequal lengths. Step 2: decodes beside a fresh prefill.
    const first = await decoder.step(prompts.map((p, i) => ({ state: states[i]!, tokens: p })));
    const late = decoder.open();
    const second = await decoder.step([
      ...states.map((state) => ({ state, tokens: [4] })),
      { state: late, tokens: prompts[2]! },
    ]);
    const third = await decoder.step(states.map((state) => ({ state, tokens: [9] })));
    for (let i = 0; i < 3; i++) {
      expect(maxDiff(first[i]!, alone[i]![0]!)).toBeLessThan(1e-4);
      expect(maxDiff(second[i]!, alone[i]![1]!)).toBeLessThan(1e-4);
      expect(maxDiff(third[i]!, alone[i]![2]!)).toBeLessThan(1e-4);
    }
    expect(maxDiff(second[3]!, alone[2]![0]!)).toBeLessThan(1e-4);
    expect(states.map((s) => s.length)).toEqual([3, 15, 42]);
    expect(decoder.cachedTokens).toBe(3 + 15 + 42 + 40);
    for (const state of [...states, late]) decoder.release(state);
    expect(decoder.cachedTokens).toBe(0);
    // The released caches are dropped: what it holds now is one decode run's room for the
    // one sequence (a few rows of 17 positions), not the 100 positions released.
    const probe = decoder.open();
    await decoder.step([{ state: probe, tokens: [1] }]);
    expect(decoder.cacheBytesAllocated).toBeLessThan(decoder.cacheBytesPerToken * 60);
    decoder.release(probe);
  });

  it('keeps each sequence exact while the decode batch changes company, in one run or in the runs given', async () => {
    // Same company for several steps (the batch's own tensors), then one leaves, one joins
    // and one prefills beside the decodes. Grouped, even and odd sequences decode in runs of
    // their own, as a scheduler splitting by past may ask.
    const prompts = [tokens(3, 1), tokens(17, 2), tokens(9, 4), tokens(30, 6)];
    const feeds = (i: number, n: number) => [prompts[i]!, ...tokens(n, i + 10).map((t) => [t])];
    const alone = await Promise.all([0, 1, 2, 3].map(async (i) => feedAlone(feeds(i, 12))));
    const grouped = await loadOrtStepDecoder(model.dir, { session: { intraOpNumThreads: 1 } });
    try {
      for (const d of [decoder, grouped]) {
        const states = prompts.map(() => d.open());
        const got: Float32Array[][] = [[], [], [], []];
        const fed = [0, 0, 0, 0];
        const step = async (members: number[]) => {
          const out = await d.step(
            members.map((i) => ({
              state: states[i]!,
              tokens: feeds(i, 12)[fed[i]!]!,
              ...(d === grouped ? { run: fed[i] === 0 ? 2 : i % 2 } : {}),
            })),
          );
          members.forEach((i, j) => {
            got[i]!.push(out[j]!);
            fed[i]!++;
          });
        };
        await step([0, 1, 2]);
        for (let s = 0; s < 4; s++) await step([0, 1, 2]);
        d.release(states[1]!);
        await step([0, 2, 3]); // one left, one prefills
        for (let s = 0; s < 3; s++) await step([0, 2, 3]);
        await step([2, 3]); // 0 sits out a step, then comes back
        await step([3, 0, 2]);
        for (const i of [0, 1, 2, 3]) {
          got[i]!.forEach((logits, s) => expect(maxDiff(logits, alone[i]![s]!)).toBeLessThan(1e-4));
        }
        for (const i of [0, 2, 3]) d.release(states[i]!);
      }
    } finally {
      await grouped.close();
    }
  });

  it('refuses a step past the model positions without touching the cache', async () => {
    const state = decoder.open();
    await expect(decoder.step([{ state, tokens: tokens(129, 1) }])).rejects.toThrow(
      /128 positions/,
    );
    expect(state.length).toBe(0);
    decoder.release(state);
  });

  it('is what the engine makes of a decoder folder, on the session opened at load', async () => {
    const loaded = await loadOrtModel(model.dir, { intraOpNumThreads: '1' });
    try {
      const prompt = tokens(20, 3);
      const [alone] = await feedAlone([prompt]);
      const made = await loaded.newStepDecoder();
      expect(loaded.describe().openContexts).toBe(1);
      expect([made.vocabSize, made.maxSequenceLength, made.eosTokenId]).toEqual([97, 128, 0]);
      const state = made.open();
      const [logits] = await made.step([{ state, tokens: prompt }]);
      expect(maxDiff(logits!, alone!)).toBe(0);
      expect(made.lastStepMs).toBeGreaterThanOrEqual(made.lastSessionMs);
      expect(made.lastSessionMs).toBeGreaterThan(0);
      await made.close();
      expect(loaded.describe().openContexts).toBe(0);
      await expect(made.step([{ state, tokens: [1] }])).rejects.toThrow(/closed/);
      // One the model still holds is closed with it.
      const held = await loaded.newStepDecoder();
      await loaded.dispose();
      await expect(held.step([{ state: held.open(), tokens: [1] }])).rejects.toThrow(/closed/);
    } finally {
      await loaded.dispose();
    }
  });

  it('fails only the step whose input is bad, and keeps serving', async () => {
    const [good, bad] = [decoder.open(), decoder.open()];
    await decoder.step([{ state: good, tokens: [5, 6] }]);
    await expect(decoder.step([{ state: bad, tokens: [] }])).rejects.toThrow(/no tokens/);
    const [next] = await decoder.step([{ state: good, tokens: [7] }]);
    const [alone] = (await feedAlone([[5, 6], [7]])).slice(1);
    expect(maxDiff(next!, alone!)).toBeLessThan(1e-4);
    decoder.release(good);
    decoder.release(bad);
  });

  it('rejects a model that is not a KV-cache decoder, naming what is missing', async () => {
    const dir = await tinyModel(join(root, 'tiny'));
    const error = await loadOrtStepDecoder(dir, { maxSequenceLength: 8 }).catch((e: unknown) => e);
    expect(KilnError.is(error, 'UNSUPPORTED_FORMAT')).toBe(true);
    expect((error as Error).message).toMatch(/input_ids, attention_mask, position_ids are missing/);
  });
});
