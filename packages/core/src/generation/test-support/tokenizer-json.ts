/**
 * Small `tokenizer.json` files of the model types Hugging Face folders carry besides GPT-2's
 * byte-level BPE, written by hand so that tests need no hub: a SentencePiece-style BPE with
 * byte fallback (Llama's layout, or Metaspace's), and a Unigram (T5's). Their vocabularies
 * hold ASCII letters and a few words; anything else is spelled in bytes (`<0xE2>`) by the BPE,
 * or is `<unk>` for the Unigram.
 */

const SPACE = '\u2581';
const LETTERS = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?\'"-:;()'];
/** Pieces each made of two pieces before it, with the merge that makes it. */
const MERGES: readonly (readonly [string, string])[] = [
  [SPACE, 't'],
  ['h', 'e'],
  [`${SPACE}t`, 'he'],
  [SPACE, 'a'],
  ['n', 'd'],
  [`${SPACE}a`, 'nd'],
  [SPACE, SPACE],
  [`${SPACE}${SPACE}`, `${SPACE}${SPACE}`],
  ['i', 'n'],
  [SPACE, 'in'],
];

const special = (id: number, content: string) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});

function bpeVocab(): Record<string, number> {
  const pieces = ['<unk>', '<s>', '</s>'];
  for (let b = 0; b < 256; b++) pieces.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  pieces.push(SPACE, ...LETTERS, '\u4E16', '\u754C');
  for (const [a, b] of MERGES) pieces.push(a + b);
  return Object.fromEntries(pieces.map((p, id) => [p, id]));
}

/** Adds `<s>` before a text, as Llama's tokenizer does. */
const bosProcessor = {
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [
    { SpecialToken: { id: '<s>', type_id: 0 } },
    { Sequence: { id: 'A', type_id: 0 } },
    { Sequence: { id: 'B', type_id: 1 } },
  ],
  special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
};

function bpeModel() {
  return {
    type: 'BPE',
    dropout: null,
    unk_token: '<unk>',
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: true,
    byte_fallback: true,
    vocab: bpeVocab(),
    merges: MERGES.map(([a, b]) => `${a} ${b}`),
  };
}

const addedTokens = [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')];

/**
 * Llama 2's layout: the normalizer prepends `▁` and turns spaces into `▁`; BPE with byte
 * fallback; the decoder turns `▁` back into spaces, bytes back into characters, and strips
 * the one space the normalizer added.
 */
export function llamaStyleBpeJson(): object {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: {
      type: 'Sequence',
      normalizers: [
        { type: 'Prepend', prepend: SPACE },
        { type: 'Replace', pattern: { String: ' ' }, content: SPACE },
      ],
    },
    pre_tokenizer: null,
    post_processor: bosProcessor,
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: SPACE }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        { type: 'Strip', content: ' ', start: 1, stop: 0 },
      ],
    },
    model: bpeModel(),
  };
}

/** The newer layout of the same: a Metaspace pre-tokenizer and decoder (Mistral's, say). */
export function metaspaceBpeJson(): object {
  const metaspace = {
    type: 'Metaspace',
    replacement: SPACE,
    prepend_scheme: 'first',
    split: false,
  };
  return {
    ...llamaStyleBpeJson(),
    normalizer: null,
    pre_tokenizer: metaspace,
    decoder: {
      type: 'Sequence',
      decoders: [{ type: 'ByteFallback' }, { type: 'Fuse' }, metaspace],
    },
  };
}

/** A Unigram model with Metaspace (T5's layout), ending texts with `</s>`. */
export function unigramJson(): object {
  const scored: [string, number][] = [
    ['<unk>', 0],
    ['<s>', 0],
    ['</s>', 0],
    [SPACE, -2],
    ...LETTERS.map((c, i): [string, number] => [c, -5 - i / 100]),
    ...LETTERS.filter((c) => /[a-z]/.test(c)).map((c): [string, number] => [SPACE + c, -4]),
    [`${SPACE}the`, -3],
    [`${SPACE}and`, -3],
    ['ing', -3.5],
    ['\u4E16\u754C', -3],
  ];
  const metaspace = {
    type: 'Metaspace',
    replacement: SPACE,
    prepend_scheme: 'always',
    split: true,
  };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: metaspace,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } },
      ],
      special_tokens: { '</s>': { id: '</s>', ids: [2], tokens: ['</s>'] } },
    },
    decoder: metaspace,
    model: { type: 'Unigram', unk_id: 0, vocab: scored, byte_fallback: false },
  };
}
