import {
  BpeTokenizer,
  CharTokenizer,
  GPT2_END_OF_TEXT,
  type SamplingParams,
  type SequenceSettings,
  type StepDecoder,
  type StepEntry,
} from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { SequenceStepper } from './sequence-stepper.js';

/** GPT-2's byte → printable character table (bytes_to_unicode). */
function byteChars(): string[] {
  const printable = (b: number) =>
    (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) =>
    String.fromCodePoint(printable(b) ? b : 256 + extra++),
  );
}

/** A byte-level vocabulary without merges: a multi-byte character is several tokens. */
function byteTokenizer(): BpeTokenizer {
  const vocab: Record<string, number> = {};
  byteChars().forEach((c, b) => (vocab[c] = b));
  vocab[GPT2_END_OF_TEXT] = 256;
  return BpeTokenizer.fromGpt2Files(vocab, '#version: 0.2\n');
}

/** Every sequence's logits pick the next token of `script`, whatever it was fed. */
class ScriptDecoder implements StepDecoder<{ next: number }> {
  readonly vocabSize = 257;
  readonly maxSequenceLength = 1000;
  readonly cacheBytesPerToken = 1;
  constructor(private readonly script: readonly number[]) {}
  open = () => ({ next: 0 });
  release(): void {}
  async step(entries: readonly StepEntry<{ next: number }>[]): Promise<Float32Array[]> {
    return entries.map(({ state }) => {
      const logits = new Float32Array(this.vocabSize);
      logits[this.script[state.next++]!] = 1;
      return logits;
    });
  }
}

/** Chooses each sequence's tokens itself: the token after the last one fed, in the vocabulary. */
class ChoosingDecoder implements StepDecoder<{ sampling: SamplingParams | undefined }> {
  readonly vocabSize = 4;
  readonly maxSequenceLength = 100;
  readonly cacheBytesPerToken = 1;
  readonly opened: (SamplingParams | undefined)[] = [];
  open = (sequence?: SequenceSettings) => {
    this.opened.push(sequence?.sampling);
    return { sampling: sequence?.sampling };
  };
  release(): void {}
  async step(entries: readonly StepEntry<unknown>[]): Promise<number[]> {
    return entries.map(({ tokens }) => (tokens.at(-1)! + 1) % this.vocabSize);
  }
}

describe('SequenceStepper', () => {
  it('takes the tokens a decoder chose itself, which heard each sequence’s sampling', async () => {
    const decoder = new ChoosingDecoder();
    const stepper = new SequenceStepper(decoder, new CharTokenizer(['a', 'b', 'c', 'd']));
    const sampling = { doSample: true, temperature: 0.5, seed: 3 };
    const reply = await stepper.step({
      opens: [{ seq: 1, sampling, logprobs: true }, { seq: 2 }],
      entries: [
        { seq: 1, tokens: [0, 1], sample: true },
        { seq: 2, tokens: [3], sample: true },
      ],
      releases: [],
    });
    expect(decoder.opened).toEqual([sampling, undefined]);
    expect(Array.from(reply.tokens)).toEqual([2, 0]);
    expect(reply.texts).toEqual(['c', 'a']);
    // Without logits there is no log-probability to give.
    expect(reply.logprobs?.[0]).toBeNaN();
    await stepper.close();
  });

  it('detokenizes each sequence as it goes, never splitting a UTF-8 character', async () => {
    const tokenizer = byteTokenizer();
    const text = 'héllo, café — 世界 🎉🎉 ok';
    const script = tokenizer.encode(text);
    expect(script.length).toBeGreaterThan([...text].length);
    const stepper = new SequenceStepper(new ScriptDecoder(script), tokenizer);
    const pieces: string[][] = [[], []];
    let logprob = 0;
    for (let i = 0; i < script.length; i++) {
      const reply = await stepper.step({
        opens: i === 0 ? [{ seq: 1 }, { seq: 2, logprobs: true }] : [],
        entries: [1, 2].map((seq) => ({
          seq,
          tokens: [i === 0 ? 0 : script[i - 1]!],
          sample: true,
        })),
        releases: [],
      });
      expect(Array.from(reply.tokens)).toEqual([script[i], script[i]]);
      reply.texts.forEach((piece, k) => pieces[k]!.push(piece));
      expect(reply.logprobs?.[0]).toBeNaN();
      logprob = reply.logprobs![1]!;
    }
    for (const streamed of pieces) {
      expect(streamed.join('')).toBe(text);
      for (const piece of streamed) expect(piece).not.toContain('\uFFFD');
    }
    expect(logprob).toBeCloseTo(1 - Math.log(Math.E + 256), 5);
    await stepper.close();
  });

  it('constrains a sequence to its response format; one that fails does so alone', async () => {
    // The script writes '{"a":1}' then 'x' forever: the format turns the 'x' into the end.
    const tokenizer = byteTokenizer();
    const script = [...tokenizer.encode('{"a":1}'), ...tokenizer.encode('xxxx')];
    const stepper = new SequenceStepper(new ScriptDecoder(script), tokenizer);
    const format = { type: 'json_object' } as const;
    const bad = { type: 'json_schema', schema: '{"type":5}' } as const;
    const chosen: number[][] = [[], []];
    for (let i = 0; i < 8; i++) {
      const reply = await stepper.step({
        opens:
          i === 0
            ? [{ seq: 1, responseFormat: format }, { seq: 2 }, { seq: 3, responseFormat: bad }]
            : [],
        entries: (i === 0 ? [1, 2, 3] : [1, 2]).map((seq) => ({ seq, tokens: [0], sample: true })),
        releases: [],
      });
      if (i === 0) {
        expect(reply.failures).toMatchObject([{ seq: 3, error: { code: 'INVALID_INPUT' } }]);
        expect(reply.tokens[2]).toBe(-1);
      } else expect(reply.failures).toBeUndefined();
      chosen[0]!.push(reply.tokens[0]!);
      chosen[1]!.push(reply.tokens[1]!);
    }
    // Its text is complete at '}': only the end of text may follow.
    expect(tokenizer.decode(chosen[0]!.slice(0, 7))).toBe('{"a":1}');
    expect(chosen[0]![7]).toBe(256);
    expect(tokenizer.decode(chosen[1]!)).toBe('{"a":1}x');
    await stepper.close();
  });

  it('fails a sequence whose decoder chose a token its format refuses, and only it', async () => {
    const stepper = new SequenceStepper(
      new ChoosingDecoder(),
      new CharTokenizer(['<|endoftext|>', '{', '}', 'a']),
    );
    const reply = await stepper.step({
      opens: [{ seq: 1, responseFormat: { type: 'json_object' } }, { seq: 2 }],
      entries: [
        { seq: 1, tokens: [1], sample: true },
        { seq: 2, tokens: [1], sample: true },
      ],
      releases: [],
    });
    // The decoder chose '}' for both: not a JSON object's start.
    expect(reply.failures).toMatchObject([
      { seq: 1, error: { code: 'INVALID_INPUT', details: { param: 'response_format' } } },
    ]);
    expect(Array.from(reply.tokens)).toEqual([-1, 2]);
    await stepper.close();
  });
});
