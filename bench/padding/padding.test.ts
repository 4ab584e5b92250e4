import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lengthBucketer } from '@kiln/batching';
import { CPU, type Model, Predictor, type Translator, servingPropertiesFrom } from '@kiln/core';
import { createOnnxRuntimeEngine } from '@kiln/engine-onnxruntime';
import { MODEL_FILE, transformerEncoderModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Encoding,
  maxLengthTranslator,
  paddedBatchTranslator,
} from './sequence-translators.js';
import { type ServeOptions, serve } from './serve-loop.js';
import { type SequenceRequest, sequenceRequests } from './workload.js';

const MAX_LEN = 64;
const HIDDEN = 32;
const VOCAB = 1000;

const availability = await checkEngine('OnnxRuntime', async () => {
  await createOnnxRuntimeEngine().load();
  return null;
});

describe.runIf(availability.run)('padding bench on a real encoder', () => {
  let dir: string;
  let model: Model;
  const requests = sequenceRequests(40, {
    seed: 3,
    minLength: 1,
    maxLength: MAX_LEN,
    vocabSize: VOCAB,
  });
  const longest = (rs: readonly SequenceRequest[]) => Math.max(...rs.map((r) => r.ids.length));

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kiln-padding-'));
    await transformerEncoderModel(dir, {
      layers: 1,
      hidden: HIDDEN,
      heads: 2,
      maxLen: MAX_LEN,
      vocabSize: VOCAB,
    });
    const engine = await createOnnxRuntimeEngine().load();
    model = await engine.loadModel({
      name: 'encoder',
      modelDir: dir,
      modelFile: MODEL_FILE,
      device: CPU,
      options: {},
      properties: servingPropertiesFrom({}),
    });
  });

  afterAll(async () => {
    await model?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function run(
    translator: Translator<SequenceRequest, Encoding>,
    extra: Pick<ServeOptions, 'paddedLength' | 'bucketOf'>,
  ) {
    const predictor = await Predictor.create(model, translator, { intraOpThreads: 1 });
    try {
      return await serve({
        requests,
        predictors: [predictor],
        batchSize: 4,
        maxDelayMs: 2,
        concurrency: 16,
        ...extra,
      });
    } finally {
      await predictor.close();
    }
  }

  it('answers every request the same whether padded to the maximum or bucketed', async () => {
    const maxPadded = await run(maxLengthTranslator(MAX_LEN), { paddedLength: () => MAX_LEN });
    const bucketed = await run(paddedBatchTranslator(), {
      paddedLength: longest,
      bucketOf: lengthBucketer([8, 16, 32, 64], (r: SequenceRequest) => r.ids.length),
    });

    requests.forEach((request, i) => {
      const a = maxPadded.outputs[i]!;
      const b = bucketed.outputs[i]!;
      expect(a.length).toBe(request.ids.length);
      expect(b.hidden.length).toBe(request.ids.length * HIDDEN);
      for (let j = 0; j < a.hidden.length; j++)
        expect(Math.abs(a.hidden[j]! - b.hidden[j]!)).toBeLessThan(1e-4);
    });
    // The answers carry information: different requests get different encodings.
    expect(bucketed.outputs[0]!.hidden.slice(0, HIDDEN)).not.toEqual(
      bucketed.outputs[1]!.hidden.slice(0, HIDDEN),
    );
    // Bucketing computes fewer padded tokens than padding everything to 64.
    expect(bucketed.paddingFactor).toBeLessThan(maxPadded.paddingFactor);
    expect(maxPadded.paddingFactor).toBeGreaterThan(1.5);
  });
});
