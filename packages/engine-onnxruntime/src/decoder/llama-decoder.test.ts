import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type LlamaDecoderModel,
  decodeOnnxModel,
  encodeOnnxModel,
  float16IoModel,
  llamaDecoderModel,
  pythonTorchUnavailable,
} from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeOrt } from '../probe.js';
import {
  type DecoderSequence,
  type OrtStepDecoder,
  loadOrtStepDecoder,
} from './ort-step-decoder.js';

const { run: ort } = await checkEngine('OnnxRuntime', probeOrt);
const noTorch = pythonTorchUnavailable();
if (noTorch) console.warn(`skipping the Llama decoder tests: ${noTorch}`);
const run = ort && noTorch === null;

/** Prompts of several lengths; the longest spans prefill chunks of 8. */
const PROMPTS = [
  [1, 2, 3],
  [5],
  Array.from({ length: 21 }, (_, i) => (i * 37 + 11) % 256),
  [7, 7, 7, 7, 7, 7],
  [200, 100, 50, 25],
  [42, 43],
];
const NEW_TOKENS = 10;
const SESSION = { session: { intraOpNumThreads: 1 } };

let root: string;
let model: LlamaDecoderModel;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-llama-'));
  if (!run) return;
  model = await llamaDecoderModel(join(root, 'llama'), {
    greedyPrompts: PROMPTS,
    greedyTokens: NEW_TOKENS,
  });
}, 120_000);
afterAll(() => rm(root, { recursive: true, force: true }));

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

interface Running {
  readonly prompt: number;
  readonly state: DecoderSequence;
  /** What the next step feeds: prompt chunks, then the last chosen token. */
  pending: number[];
  readonly out: number[];
}

/**
 * Greedy decoding with up to `slots` sequences at once: a sequence joins when a slot frees,
 * so prompt chunks (at most `chunk` tokens) run beside other sequences' decode steps.
 */
async function rollingGreedy(
  decoder: OrtStepDecoder,
  prompts: readonly (readonly number[])[],
  slots: number,
  chunk = 8,
  /** Runs decode rows in pairs and prompt chunks in a run of their own, as a scheduler may. */
  grouped = false,
): Promise<number[][]> {
  const results: number[][] = prompts.map(() => []);
  const waiting = prompts.map((_, i) => i);
  const running: Running[] = [];
  while (waiting.length > 0 || running.length > 0) {
    while (running.length < slots && waiting.length > 0) {
      const prompt = waiting.shift()!;
      running.push({ prompt, state: decoder.open(), pending: [...prompts[prompt]!], out: [] });
    }
    const fed = running.map((r) => {
      const isPrompt = r.pending.length > 1 || r.out.length === 0;
      const tokens = r.pending.splice(0, isPrompt ? chunk : 1);
      return { r, tokens, last: r.pending.length === 0 };
    });
    const rows = await decoder.step(
      fed.map(({ r, tokens }, i) => ({
        state: r.state,
        tokens,
        ...(grouped ? { run: r.out.length > 0 ? i >> 1 : slots } : {}),
      })),
    );
    fed.forEach(({ r, last }, i) => {
      if (!last) return;
      const token = argmax(rows[i]!);
      r.out.push(token);
      r.pending = [token];
    });
    for (const r of [...running]) {
      if (r.out.length < NEW_TOKENS) continue;
      results[r.prompt] = r.out;
      decoder.release(r.state);
      running.splice(running.indexOf(r), 1);
    }
  }
  return results;
}

async function withDecoder<T>(
  dir: string,
  options: Parameters<typeof loadOrtStepDecoder>[1],
  use: (decoder: OrtStepDecoder) => Promise<T>,
): Promise<T> {
  const decoder = await loadOrtStepDecoder(dir, { ...SESSION, ...options });
  try {
    return await use(decoder);
  } finally {
    await decoder.close();
  }
}

describe.skipIf(!run)('a Llama-style decoder in a transformers.js folder', () => {
  it('reads grouped-query attention and the limits from onnx/model.onnx and config.json', async () => {
    await withDecoder(model.dir, {}, async (decoder) => {
      expect(decoder.signature).toEqual({
        layers: 2,
        heads: 2,
        headSize: 16,
        vocabSize: 256,
        useCacheBranch: false,
        logitsToKeep: undefined,
        cacheType: 'float32',
        newKvOutputs: true,
      });
      expect(decoder.maxSequenceLength).toBe(128);
      expect(decoder.eosTokenId).toBe(0);
      expect(decoder.cacheBytesPerToken).toBe(2 * 2 * 2 * 16 * 4);
    });
  });

  it("chooses torch's greedy tokens, each prompt alone and four at a time", async () => {
    await withDecoder(model.dir, {}, async (decoder) => {
      for (const [i, prompt] of PROMPTS.entries())
        expect(await rollingGreedy(decoder, [prompt], 1)).toEqual([model.greedy[i]]);
      expect(await rollingGreedy(decoder, PROMPTS, 4)).toEqual(model.greedy);
    });
  });

  it('decode rows in the runs a scheduler chose choose the same tokens', async () => {
    await withDecoder(model.dir, {}, async (decoder) => {
      expect(await rollingGreedy(decoder, PROMPTS, 4, 3, true)).toEqual(model.greedy);
    });
  });

  it('feeds use_cache_branch and num_logits_to_keep, and reads external data', async () => {
    const merged = await llamaDecoderModel(join(root, 'merged'), {
      mergedInputs: true,
      externalData: true,
      tied: true,
      seed: 3,
      greedyPrompts: PROMPTS,
      greedyTokens: NEW_TOKENS,
    });
    await withDecoder(merged.dir, {}, async (decoder) => {
      expect(decoder.signature).toMatchObject({
        useCacheBranch: true,
        logitsToKeep: 'num_logits_to_keep',
        // Weights in another file: hard-linked beside the copy with the new positions.
        newKvOutputs: true,
      });
      expect(await rollingGreedy(decoder, PROMPTS, 4)).toEqual(merged.greedy);
    });
  });

  it("loads option.dtype's file (q8 → onnx/model_quantized.onnx) and names the files there when it is absent", async () => {
    await copyFile(
      join(model.dir, 'onnx', 'model.onnx'),
      join(model.dir, 'onnx', 'model_quantized.onnx'),
    );
    await withDecoder(model.dir, { dtype: 'q8' }, async (decoder) => {
      expect(await rollingGreedy(decoder, PROMPTS.slice(0, 2), 2)).toEqual(
        model.greedy.slice(0, 2),
      );
    });
    const error = await loadOrtStepDecoder(model.dir, { dtype: 'fp16' }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'MODEL_NOT_FOUND' });
    expect((error as Error).message).toMatch(
      /model_fp16\.onnx.*model\.onnx, model_quantized\.onnx/,
    );
  });

  it('serves an fp16 file (option.dtype fp16): pasts, presents and logits in float16', async () => {
    const fp32 = decodeOnnxModel(await readFile(join(model.dir, 'onnx', 'model.onnx')));
    const fp16 = float16IoModel(fp32, (name) => /^(past_key_values|present)\.|^logits$/.test(name));
    await writeFile(join(model.dir, 'onnx', 'model_fp16.onnx'), encodeOnnxModel(fp16));
    await withDecoder(model.dir, { dtype: 'fp16' }, async (decoder) => {
      expect(decoder.signature.cacheType).toBe('float16');
      // Its presents are Casts of float32 Concats: served as it is, the presents fetched whole.
      expect(decoder.signature.newKvOutputs).toBe(false);
      // Half the bytes a position.
      expect(decoder.cacheBytesPerToken).toBe(2 * 2 * 2 * 16 * 2);
      // The cache rounded to float16 keeps torch's greedy choices on this model.
      for (const [i, prompt] of PROMPTS.entries())
        expect(await rollingGreedy(decoder, [prompt], 1)).toEqual([model.greedy[i]]);
      expect(await rollingGreedy(decoder, PROMPTS, 4)).toEqual(model.greedy);
      expect(await rollingGreedy(decoder, PROMPTS, 4, 3)).toEqual(model.greedy);
    });
  });
});
