import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probeOrt } from '@kiln/engine-onnxruntime';
import { kjvTextUnavailable, pythonTorchUnavailable } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addEndToken, compareGeneration, compareTokenizer } from './parity-check.js';
import { PARITY_CHATS, PARITY_PROMPTS, parityText } from './parity-inputs.js';
import { type ParityModel, makeParityModels } from './parity-models.js';

const { run: ort } = await checkEngine('OnnxRuntime', probeOrt);
const missing = pythonTorchUnavailable() ?? kjvTextUnavailable();
if (missing) console.warn(`skipping the transformers.js parity check: ${missing}`);

/** Emoji, CJK, runs of spaces and newlines among them. */
const PROMPTS = [0, 4, 5, 8, 11].map((i) => PARITY_PROMPTS[i]!);

let root: string;
let models: ParityModel[];
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-llm-parity-test-'));
  if (ort && !missing) models = await makeParityModels(root, { llamaVocab: 1000, maxLen: 160 });
}, 60_000);
afterAll(() => rm(root, { recursive: true, force: true }));

describe.skipIf(!ort || missing !== null)('bench/llm parity with transformers.js', () => {
  it('makes folders transformers.js loads, and both choose the same greedy tokens', async () => {
    for (const model of models) {
      const prompts = model.chat ? [...PROMPTS, PARITY_CHATS[1]!] : PROMPTS;
      const rows = await compareGeneration(root, model, prompts, 8);
      expect(rows.map((r) => [r.kilnPrompt, r.kiln])).toEqual(
        rows.map((r) => [r.transformersPrompt, r.transformers]),
      );
      expect(rows.every((r) => r.same)).toBe(true);
      expect(rows.every((r) => r.kiln.length > 0)).toBe(true);
      // A second end-of-sequence token (generation_config.json's list): both stop at it.
      await addEndToken(model.dir, rows[0]!.transformers[3]!);
      const ended = await compareGeneration(root, model, prompts.slice(0, 2), 8);
      expect(ended.every((r) => r.same)).toBe(true);
      expect(ended[0]).toMatchObject({ kilnEnded: true, transformersEnded: true });
    }
  });

  it('encodes and decodes 50 kB of text alike', async () => {
    const text = parityText(50_000);
    for (const model of models)
      expect(await compareTokenizer(root, model, text)).toMatchObject({
        encodeSame: true,
        decodeSame: true,
        kilnRoundTrip: true,
        transformersRoundTrip: true,
      });
  });
});
