import { afterAll, describe, expect, it } from 'vitest';
import { type KilnError, KilnErrorCode, type StepOutput } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { probePython } from './probe.js';
import { TEST_PYTHON, loadTestModel, removeTestModels } from './test-support.js';

const { run } = await checkEngine('Python', () => probePython(TEST_PYTHON));

afterAll(removeTestModels);

// Each request's logits are one-hot at (the sum of the tokens it was fed) % 7; a feed of 6
// answers the number of steps so far and of requests held instead, of 5 raises, of 4 ends the
// process, of 3 answers a row too short.
const COUNTING = `
import json, os
import numpy as np

class Counter:
    def __init__(self, properties):
        self.vocab_size = 7
        self.max_sequence_length = int(properties["max_len"])
        self.eos_token_id = 0
        self.sums = {}
        self.steps = 0

    def step(self, batch):
        self.steps += 1
        for r in batch.finished:
            del self.sums[r]
        for r in batch.new_requests:
            self.sums[r.id] = 0
        rows = []
        for feed in batch.feeds:
            if feed.tokens == [5]:
                raise ValueError("five is not fed")
            if feed.tokens == [4]:
                os._exit(4)
            if feed.tokens == [3]:
                return [np.zeros(3)]
            if feed.tokens == [6]:
                rows.append(np.array([self.steps, len(self.sums), 0, 0, 0, 0, 0], np.float32))
                continue
            self.sums[feed.request_id] += sum(feed.tokens)
            row = np.zeros(7, np.float32)
            row[self.sums[feed.request_id] % 7] = 1
            rows.append(row)
        return rows
`;

async function decoderOf(source = COUNTING, options: Record<string, string> = {}) {
  const model = await loadTestModel(source, { handler: 'Counter', max_len: '64', ...options });
  return { model, decoder: await model.newStepDecoder() };
}

const row = (output: StepOutput | undefined) => output as Float32Array;
const argmax = (output: StepOutput) => row(output).indexOf(Math.max(...row(output)));

// Chooses a token itself — the number of parameters its request set plus the last token fed —
// unless its request asked to sample: then it answers a row of logits, one-hot at that token.
const CHOOSING = `
import numpy as np

class StepHandler:
    vocab_size = 7
    max_sequence_length = 64

    def __init__(self, properties):
        self.parameters = {}

    def step(self, batch):
        for request in batch.new_requests:
            self.parameters[request.id] = request.parameters
        answer = []
        for feed in batch.feeds:
            parameters = self.parameters[feed.request_id]
            if parameters.get("do_sample"):
                answer.append(np.eye(7)[feed.tokens[-1]])
            else:
                answer.append(len(parameters) + feed.tokens[-1])
        return answer
`;

describe.skipIf(!run)('PythonStepDecoder', () => {
  it("steps the handler's object: opens, feeds and releases in one call, a row of logits per feed", async () => {
    const { model, decoder } = await decoderOf();
    expect(decoder).toMatchObject({ vocabSize: 7, maxSequenceLength: 64, eosTokenId: 0 });
    expect(decoder.cacheBytesPerToken).toBe(1);
    const a = decoder.open();
    const b = decoder.open();
    const dropped = decoder.open();
    decoder.release(dropped); // never sent: the handler never hears of it
    let rows = await decoder.step([
      { state: a, tokens: [1, 2] },
      { state: b, tokens: [2, 4] },
    ]);
    expect(rows.map(argmax)).toEqual([3, 6]);
    decoder.release(b);
    rows = await decoder.step([{ state: a, tokens: [2] }]);
    expect(rows.map(argmax)).toEqual([5]);
    expect(rows[0]).toBeInstanceOf(Float32Array);
    // Three steps, one request held: b's release went with the second.
    const [counts] = await decoder.step([{ state: a, tokens: [6] }]);
    expect([...row(counts).subarray(0, 2)]).toEqual([3, 1]);
    expect(model.describe()).toMatchObject({ handler: 'Counter', workers: 1 });
    await decoder.close();
    expect(model.describe()).toMatchObject({ workers: 0 });
    await expect(decoder.step([{ state: a, tokens: [1] }])).rejects.toThrow(/closed/);
    await model.dispose();
  });

  it('sends the releases no step takes along on their own', async () => {
    const { model, decoder } = await decoderOf();
    const [a, b] = [decoder.open(), decoder.open()];
    await decoder.step([
      { state: a, tokens: [1] },
      { state: b, tokens: [1] },
    ]);
    decoder.release(b);
    await new Promise((resolve) => setImmediate(resolve));
    // Its third step: the second one freed b.
    const [counts] = await decoder.step([{ state: a, tokens: [6] }]);
    expect([...row(counts).subarray(0, 2)]).toEqual([3, 1]);
    await model.dispose();
  });

  it('takes the tokens a handler chose, which reads each request’s parameters by DJL’s names', async () => {
    const model = await loadTestModel(CHOOSING);
    const decoder = await model.newStepDecoder();
    const a = decoder.open({ sampling: { temperature: 0.5, seed: 3 } });
    const b = decoder.open({ sampling: { doSample: true } });
    const [chosen, logits] = await decoder.step([
      { state: a, tokens: [1] },
      { state: b, tokens: [4] },
    ]);
    expect(chosen).toBe(3);
    expect(argmax(logits!)).toBe(4);
    await expect(decoder.step([{ state: a, tokens: [5] }])).rejects.toThrow(
      'the step handler chose token 7, outside its vocabulary of 7',
    );
    await model.dispose();
  });

  it('fails a step the handler raises in or answers wrongly, and steps on', async () => {
    const { model, decoder } = await decoderOf();
    const a = decoder.open();
    await expect(decoder.step([{ state: a, tokens: [5] }])).rejects.toMatchObject({
      code: KilnErrorCode.EngineError,
      message: expect.stringContaining('ValueError: five is not fed') as unknown,
    });
    await expect(decoder.step([{ state: a, tokens: [3] }])).rejects.toThrow(
      /the step handler answered logits of shape \[1, 3\], not \[1, 7\]/,
    );
    const rows = await decoder.step([{ state: a, tokens: [1] }]);
    expect(rows.map(argmax)).toEqual([1]);
    await model.dispose();
  });

  it('tells its owner when its process dies', async () => {
    const { model, decoder } = await decoderOf();
    const lost = new Promise<KilnError>((resolve) => decoder.onLost(resolve));
    const a = decoder.open();
    await expect(decoder.step([{ state: a, tokens: [4] }])).rejects.toMatchObject({
      code: KilnErrorCode.WorkerCrashed,
    });
    const error = await lost;
    expect(error.code).toBe(KilnErrorCode.WorkerCrashed);
    expect(error.message).toMatch(/Python worker of m exited \(code 4\)/);
    await model.dispose();
  });

  it('refuses a handler whose object does not say its vocabulary', async () => {
    const model = await loadTestModel(
      'class StepHandler:\n    def __init__(self, properties):\n        self.max_sequence_length = 8\n',
    );
    await expect(model.newStepDecoder()).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
      message: expect.stringMatching(
        /step handler of m failed to load: .*vocab_size must be an integer >= 1, not None/,
      ) as unknown,
    });
    const missing = await loadTestModel('def handle(inputs):\n    return None\n');
    await expect(missing.newStepDecoder()).rejects.toThrow(/model.py has no function StepHandler/);
    await model.dispose();
    await missing.dispose();
  });
});
