import { describe, expect, it } from 'vitest';
import { parseGenerationParameters } from './generation-parameters.js';

describe('parseGenerationParameters', () => {
  it('reads what the sampler acts on', () => {
    expect(
      parseGenerationParameters({
        max_new_tokens: 7,
        do_sample: true,
        temperature: 0.7,
        top_k: 5,
        top_p: 0.9,
        repetition_penalty: 1.1,
        seed: 3,
        stop_sequences: ['\n'],
      }),
    ).toEqual({
      maxNewTokens: 7,
      doSample: true,
      temperature: 0.7,
      topK: 5,
      topP: 0.9,
      repetitionPenalty: 1.1,
      seed: 3,
      stop: ['\n'],
    });
  });

  it('serves the defaults clients send for parameters Kiln lacks', () => {
    expect(
      parseGenerationParameters({
        details: true,
        return_full_text: false,
        decoder_input_details: false,
        watermark: false,
        best_of: 1,
        typical_p: null,
        truncate: null,
      }),
    ).toMatchObject({ maxNewTokens: 30, doSample: false });
  });

  it('refuses a parameter Kiln lacks when its value asks for something, naming it', () => {
    for (const [key, value] of [
      ['typical_p', 0.5],
      ['return_full_text', true],
      ['best_of', 2],
      ['truncate', 100],
      ['frequency_penalty', 0.5],
      ['num_beams', 4],
    ] as const)
      expect(() => parseGenerationParameters({ [key]: value })).toThrow(
        new RegExp(`parameter ${key} is not supported`),
      );
  });

  it('refuses an unknown parameter with the closest one Kiln reads', () => {
    expect(() => parseGenerationParameters({ max_new_token: 5 })).toThrow(
      /unknown parameter max_new_token \(did you mean max_new_tokens\?\)/,
    );
    expect(() => parseGenerationParameters({ banana: 1 })).toThrow(/unknown parameter banana;/);
    expect(() => parseGenerationParameters({ constructor: 1 })).toThrow(/unknown parameter/);
  });
});
