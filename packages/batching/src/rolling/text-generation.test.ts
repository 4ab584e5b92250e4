import { CharTokenizer, StopText, parseGenerationParameters } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { HashDecoder } from '../test-support/hash-decoder.js';
import { RollingScheduler } from './rolling-scheduler.js';
import { generateText } from './text-generation.js';

const vocab = ['<|endoftext|>', ...'abcdefghijklmnopqrstuvwxyz ._'];
const tokenizer = new CharTokenizer(vocab);

describe('generateText', () => {
  it('streams the text it answers, and ends before a stop string without showing it', async () => {
    const scheduler = new RollingScheduler(new HashDecoder(vocab.length));
    const free = await generateText(
      scheduler,
      tokenizer,
      'hello',
      parseGenerationParameters({ max_new_tokens: 40 }),
    );
    expect(free.text.length).toBeGreaterThan(3);
    const stop = free.text.slice(2, 4);
    const pieces: string[] = [];
    const stopped = await generateText(
      scheduler,
      tokenizer,
      'hello',
      parseGenerationParameters({ max_new_tokens: 40, stop: [stop] }),
      { onText: (t) => pieces.push(t) },
    );
    const cut = free.text.indexOf(stop);
    expect(stopped.text).toBe(free.text.slice(0, cut));
    expect(pieces.join('')).toBe(stopped.text);
    expect(stopped.finishReason).toBe('stop');
  });

  it('answers the same with a tokenizer that answers later (on a thread of its own)', async () => {
    const later = <T>(value: () => T) =>
      new Promise<T>((resolve, reject) =>
        setTimeout(() => {
          try {
            resolve(value());
          } catch (error) {
            reject(error as Error);
          }
        }, 1),
      );
    const threaded = {
      eosTokenId: tokenizer.eosTokenId,
      encode: (text: string) => later(() => tokenizer.encode(text)),
      decode: (tokens: readonly number[]) => later(() => tokenizer.decode(tokens)),
    };
    const scheduler = new RollingScheduler(new HashDecoder(vocab.length));
    const parameters = parseGenerationParameters({ max_new_tokens: 40 });
    const free = await generateText(scheduler, tokenizer, 'hello', parameters);
    const stop = free.text.slice(2, 4);
    const stopping = parseGenerationParameters({ max_new_tokens: 40, stop: [stop] });
    const stopped = await generateText(scheduler, tokenizer, 'hello', stopping);
    // Side by side, so that one step holds both sequences' tokens while they are decoded.
    const pieces: string[] = [];
    const [freeLater, stoppedLater] = await Promise.all([
      generateText(scheduler, threaded, 'hello', parameters),
      generateText(scheduler, threaded, 'hello', stopping, { onText: (t) => pieces.push(t) }),
    ]);
    expect(freeLater).toMatchObject({
      text: free.text,
      tokens: free.tokens,
      finishReason: free.finishReason,
    });
    // The stop string ends the sequence at the same token: none is generated past it.
    expect(stoppedLater).toMatchObject({
      text: stopped.text,
      tokens: stopped.tokens,
      finishReason: 'stop',
    });
    expect(pieces.join('')).toBe(stopped.text);
    await expect(generateText(scheduler, threaded, 'HELLO', parameters)).rejects.toThrow(
      /"H" is not in the model's vocabulary/,
    );
    const failing = { ...threaded, decode: () => Promise.reject(new Error('thread gone')) };
    await expect(generateText(scheduler, failing, 'hello', parameters)).rejects.toThrow(
      /thread gone/,
    );
    expect(scheduler.stats()).toMatchObject({ active: 0, cacheTokensReserved: 0 });
  });

  it('refuses text outside the vocabulary and bad parameters with INVALID_INPUT', async () => {
    const scheduler = new RollingScheduler(new HashDecoder(vocab.length));
    await expect(
      generateText(scheduler, tokenizer, 'HELLO', parseGenerationParameters({})),
    ).rejects.toThrow(/"H" is not in the model's vocabulary/);
    expect(() => parseGenerationParameters({ max_new_tokens: 'many' })).toThrow(
      /max_new_tokens must be a number/,
    );
    expect(() => parseGenerationParameters({ stop: [1] })).toThrow(/stop must be/);
    expect(() => parseGenerationParameters([])).toThrow(/JSON object/);
    expect(parseGenerationParameters({ do_sample: true, top_k: 5, seed: 3 })).toMatchObject({
      maxNewTokens: 30,
      doSample: true,
      topK: 5,
      seed: 3,
      stop: [],
    });
  });
});

describe('StopText', () => {
  it('holds back a possible stop string until it is ruled out', () => {
    const s = new StopText(['END']);
    expect(s.push('ab')).toBe('ab');
    expect(s.push('E')).toBe('');
    expect(s.push('x')).toBe('Ex');
    expect(s.push('EN')).toBe('');
    expect(s.push('D and more')).toBe('');
    expect(s.stopped).toBe(true);
    expect(s.all).toBe('abEx');
    const t = new StopText(['END']);
    t.push('aE');
    expect(t.flush()).toBe('E');
  });
});
