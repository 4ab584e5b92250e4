import { CharTokenizer, type StepDecoder, type StepEntry, logSoftmaxAt } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { SequenceStepper } from './sequence-stepper.js';

/** Fixed logits each step: token 2 first, then 0, 1 and 3. */
class FixedDecoder implements StepDecoder<null> {
  readonly vocabSize = 4;
  readonly maxSequenceLength = 100;
  readonly cacheBytesPerToken = 1;
  readonly logits = new Float32Array([1, 0.5, 3, -2]);
  open = () => null;
  release(): void {}
  async step(entries: readonly StepEntry<null>[]): Promise<Float32Array[]> {
    return entries.map(() => this.logits.slice());
  }
}

describe('SequenceStepper log-probabilities', () => {
  it('lists the k most likely tokens with their text, only for sequences that asked', async () => {
    const decoder = new FixedDecoder();
    const stepper = new SequenceStepper(decoder, new CharTokenizer(['a', 'b', 'c', 'd']));
    const reply = await stepper.step({
      opens: [{ seq: 1, logprobs: true, topLogprobs: 3 }, { seq: 2 }, { seq: 3, logprobs: true }],
      entries: [1, 2, 3].map((seq) => ({ seq, tokens: [0], sample: true })),
      releases: [],
    });
    expect(Array.from(reply.tokens)).toEqual([2, 2, 2]);
    const logprob = (t: number) => logSoftmaxAt(decoder.logits, t);
    expect(reply.alternatives?.[0]).toEqual({
      text: 'c',
      top: [
        { token: 2, text: 'c', logprob: logprob(2) },
        { token: 0, text: 'a', logprob: logprob(0) },
        { token: 1, text: 'b', logprob: logprob(1) },
      ],
    });
    expect(reply.alternatives?.[1]).toBeUndefined();
    expect(reply.alternatives?.[2]).toEqual({ text: 'c', top: [] });
    expect(reply.logprobs?.[0]).toBeCloseTo(logprob(2), 12);
    await stepper.close();
  });
});
