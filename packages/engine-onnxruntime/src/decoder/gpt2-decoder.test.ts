import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Gpt2DecoderModel, gpt2DecoderModel, pythonTorchUnavailable } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeOrt } from '../probe.js';
import { type OrtStepDecoder, loadOrtStepDecoder } from './ort-step-decoder.js';

const { run: ort } = await checkEngine('OnnxRuntime', probeOrt);
const noTorch = pythonTorchUnavailable();
if (noTorch) console.warn(`skipping the GPT-2 decoder tests: ${noTorch}`);
const run = ort && noTorch === null;

const PROMPTS = [
  [256, 72, 101],
  [5],
  Array.from({ length: 19 }, (_, i) => (i * 41 + 7) % 300),
  [32, 32, 32, 32],
];
const NEW_TOKENS = 10;

let root: string;
let model: Gpt2DecoderModel;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-ort-gpt2-'));
  if (!run) return;
  model = await gpt2DecoderModel(join(root, 'gpt2'), {
    vocab: 300,
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

/** Greedy decoding of all prompts at once: whole prompts in the first step, then a token each. */
async function greedyTogether(
  decoder: OrtStepDecoder,
  prompts: readonly (readonly number[])[],
): Promise<number[][]> {
  const states = prompts.map(() => decoder.open());
  const out: number[][] = prompts.map(() => []);
  let feed = prompts.map((p) => [...p]);
  for (let step = 0; step < NEW_TOKENS; step++) {
    const rows = await decoder.step(states.map((state, i) => ({ state, tokens: feed[i]! })));
    feed = rows.map((row, i) => {
      const token = argmax(row);
      out[i]!.push(token);
      return [token];
    });
  }
  for (const state of states) decoder.release(state);
  return out;
}

describe.skipIf(!run)('a GPT-2-style decoder in a transformers.js folder', () => {
  it("reads multi-head attention from onnx/model.onnx and chooses torch's greedy tokens", async () => {
    const decoder = await loadOrtStepDecoder(model.dir, { session: { intraOpNumThreads: 1 } });
    try {
      expect(decoder.signature).toMatchObject({
        layers: 2,
        heads: 4,
        headSize: 16,
        vocabSize: 300,
      });
      expect(decoder.maxSequenceLength).toBe(128);
      expect(decoder.eosTokenId).toBe(256);
      for (const [i, prompt] of PROMPTS.entries())
        expect(await greedyTogether(decoder, [prompt])).toEqual([model.greedy[i]]);
      expect(await greedyTogether(decoder, PROMPTS)).toEqual(model.greedy);
    } finally {
      await decoder.close();
    }
  });
});
