import { describe, expect, it } from 'vitest';
import { trainWordBpe } from './word-bpe-trainer.js';

describe('trainWordBpe', () => {
  it('merges the most frequent pair first, never across words, ties by the pair', () => {
    const words = new Map([
      ['hug', 10],
      ['pug', 5],
      ['pun', 12],
      ['bun', 4],
      ['hugs', 5],
    ]);
    // Hugging Face's course example: u g (20), then u n (16), then h ug (15).
    expect(trainWordBpe(words, 3)).toEqual([
      ['u', 'g'],
      ['u', 'n'],
      ['h', 'ug'],
    ]);
  });

  it('stops when every word is one piece, and gives the same merges every time', () => {
    const words = new Map([
      ['aaaa', 3],
      ['abab', 2],
      ['ba', 1],
    ]);
    const merges = trainWordBpe(words, 100);
    expect(trainWordBpe(words, 100)).toEqual(merges);
    // Each word ends as one piece, and no merge was wasted.
    const pieces = new Set(merges.map(([a, b]) => a + b));
    for (const word of words.keys()) expect(pieces.has(word)).toBe(true);
    // a a (9), then a b (4) before aa aa (3): counts as they stand after each merge.
    expect(merges).toEqual([
      ['a', 'a'],
      ['a', 'b'],
      ['aa', 'aa'],
      ['ab', 'ab'],
      ['b', 'a'],
    ]);
  });
});
