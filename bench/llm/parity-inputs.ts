// What the parity check feeds both sides: prompts, and a long text (the King James Bible
// with emoji, CJK, runs of spaces, tabs and newlines mixed in).
import { readKjvText } from '@kiln/model-tools';
import type { ParityPrompt } from './parity-check.js';

/** Prompts with the characters tokenizers disagree on when they disagree at all. */
export const PARITY_PROMPTS: readonly string[] = [
  'In the beginning God created the heaven and the earth.',
  'And God said, Let there be light',
  'The LORD is my shepherd; I shall not want.',
  'emoji \u{1F642} and \u{1F525}\u{1F525} fire',
  'family \u{1F468}\u200D\u{1F469}\u200D\u{1F467} and flag \u{1F1EB}\u{1F1F7}',
  '\u65E5\u672C\u8A9E\u306E\u30C6\u30AD\u30B9\u30C8',
  '\u4E2D\u6587 mixed with English',
  '\uD55C\uAD6D\uC5B4 \uD14D\uC2A4\uD2B8',
  'runs   of    spaces     here',
  '   leading spaces',
  'trailing spaces   ',
  'new\nlines\n\nand\n\n\nmore',
  'tabs\tand\t\tmore tabs',
  ' a single leading space',
  'caf\u00E9 na\u00EFve r\u00E9sum\u00E9',
  'numbers 1234567890 and 3.14159',
  "punctuation!?;:,.\u2014\u201Cquoted\u201D and spaced , it 's",
  'Greek \u03B1\u03B2\u03B3 and Cyrillic \u0436\u0438\u0437\u043D\u044C',
  'math \u2211\u222B\u221A and arrows \u2192\u21D2',
  'x',
];

/** Chats for a model with a chat template. */
export const PARITY_CHATS: readonly ParityPrompt[] = [
  [{ role: 'user', content: 'Who made the heaven and the earth?' }],
  [
    { role: 'system', content: 'Answer in the words of the King James Bible.' },
    { role: 'user', content: 'What is light?  \u{1F31E}' },
    { role: 'assistant', content: 'God said, Let there be light.' },
    { role: 'user', content: '\u5149\u3068\u306F\uFF1F' },
  ],
];

const MIXED_IN = [
  ' \u{1F642}',
  ' \u65E5\u672C\u8A9E',
  '    ',
  '\t',
  '\n\n',
  ' \u{1F468}\u200D\u{1F469}\u200D\u{1F467}',
  '  \u4E2D\u6587  ',
  ' caf\u00E9',
  '\u00A0',
  ' \uD55C\uAD6D\uC5B4',
  // What Hugging Face's clean-up of tokenization spaces would change.
  " , it 's so ! ",
];

/**
 * About `bytes` bytes of UTF-8 text: the KJV's verses, every third one with one of
 * MIXED_IN's pieces (in turn) put after a word, its lines joined by newlines.
 */
export function parityText(bytes: number): string {
  const verses = readKjvText().split('\n');
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    let line = verses[i % verses.length]!;
    if (i % 3 === 0) {
      const words = line.split(' ');
      const at = i % words.length;
      words[at] += MIXED_IN[(i / 3) % MIXED_IN.length]!;
      line = words.join(' ');
    }
    lines.push(line);
    size += Buffer.byteLength(line) + 1;
  }
  return lines.join('\n');
}
