import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type GenerationJob,
  type GenerationOutput,
  JobQueue,
  RollingLoop,
  type RollingLoopOptions,
  SeededSource,
  SequenceStepper,
  randomWorkload,
  serveQueue,
} from '@kiln/batching';
import { type OrtStepDecoder, loadOrtStepDecoder } from '@kiln/engine-onnxruntime';
import { gptDecoderModel } from '@kiln/model-tools';
import { tempDir } from '../support/server-harness.js';

// Rolling batching on a real ONNX Runtime decoder: each request's tokens must not depend on
// what else shares its steps (padding, masking, chunked prefill, caches gathered and
// scattered), so they must equal the tokens of generating it alone.
let root: string;
let decoder: OrtStepDecoder;
beforeAll(async () => {
  root = tempDir('rolling-decoder');
  const model = await gptDecoderModel(path.join(root, 'gpt'), {
    layers: 2,
    hidden: 32,
    heads: 2,
    maxLen: 512,
  });
  decoder = await loadOrtStepDecoder(model.dir, { session: { intraOpNumThreads: 1 } });
});
afterAll(async () => {
  await decoder?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

/** A rolling loop over the decoder on this thread, serving its own queue. */
function rolling(options: RollingLoopOptions) {
  const stepper = new SequenceStepper(decoder);
  const loop = new RollingLoop(stepper, stepper.info, options);
  const queue = new JobQueue<GenerationJob, GenerationOutput>();
  const served = serveQueue(loop, queue);
  return {
    loop,
    generate: (job: GenerationJob) => queue.submit(job).result.then((r) => r.tokens),
    close: () => (queue.close(), served),
  };
}

async function alone(request: GenerationJob): Promise<readonly number[]> {
  const one = rolling({ maxBatchSize: 1 });
  const tokens = await one.generate(request);
  await one.close();
  return tokens;
}

/** Submits each request after a random pause, so that they join and leave running batches. */
async function arriving(
  scheduler: ReturnType<typeof rolling>,
  requests: readonly GenerationJob[],
  random: SeededSource,
): Promise<(readonly number[])[]> {
  const results: Promise<readonly number[]>[] = [];
  for (const request of requests) {
    results.push(scheduler.generate(request));
    await new Promise((resolve) => setTimeout(resolve, random.exponential(3)));
  }
  const tokens = await Promise.all(results);
  await scheduler.close();
  return tokens;
}

describe('rolling batching on an ONNX Runtime decoder', () => {
  it('generates with greedy decoding the tokens each request gets alone', async () => {
    const random = new SeededSource(21);
    const requests = randomWorkload(random, {
      count: 24,
      vocab: decoder.vocabSize,
      maxPrompt: 256,
      maxOutput: 256,
    });
    const scheduler = rolling({ maxBatchSize: 8, maxPrefillTokens: 96 });
    let widest = 0;
    scheduler.loop.onStep((s) => (widest = Math.max(widest, s.sequences)));
    const batched = await arriving(scheduler, requests, random);
    expect(widest).toBeGreaterThan(1);
    for (const [i, request] of requests.entries())
      expect(batched[i], `request ${i}`).toEqual(await alone(request));
  });

  it('repeats seeded samples per request regardless of batch company', async () => {
    const random = new SeededSource(5);
    const requests = randomWorkload(random, {
      count: 12,
      vocab: decoder.vocabSize,
      maxPrompt: 64,
      maxOutput: 64,
    }).map((r, i) => ({
      ...r,
      sampling: { doSample: true, topP: 0.9, temperature: 0.9, seed: i },
    }));
    const scheduler = rolling({ maxBatchSize: 6, maxPrefillTokens: 32 });
    const batched = await arriving(scheduler, requests, random);
    for (const [i, request] of requests.entries())
      expect(batched[i], `request ${i}`).toEqual(await alone(request));
  });
});
