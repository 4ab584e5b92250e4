import { readKjvText } from './kjv-text.js';
import { trainWordBpe } from './word-bpe-trainer.js';

/** SentencePiece's word-start mark: a space, as the pieces spell it. */
export const SENTENCEPIECE_SPACE = '\u2581';
/** Llama's special tokens, ids 0, 1 and 2. */
export const SENTENCEPIECE_UNK = '<unk>';
export const SENTENCEPIECE_BOS = '<s>';
export const SENTENCEPIECE_EOS = '</s>';
export const SENTENCEPIECE_BOS_ID = 1;
export const SENTENCEPIECE_EOS_ID = 2;

/** A Zephyr-style chat template: role-tagged turns, each ending with the end-of-sequence token. */
export const SENTENCEPIECE_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

const byteToken = (b: number) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`;

/**
 * A SentencePiece-style BPE `tokenizer.json` as Llama 2's: `<unk>` `<s>` `</s>` (ids 0–2),
 * the byte tokens `<0x00>`…`<0xFF>` (ids 3–258, byte fallback for characters outside the
 * vocabulary), the text's characters, then merges trained over its words (`▁` + word) by
 * word frequency. When the text's words run out of merges, further merges (a piece and a
 * letter) fill the vocabulary, so that it holds exactly `vocabSize` entries, each decodable.
 * The normalizer prepends `▁` and turns spaces into `▁`; `<s>` starts every encoded text;
 * the decoder undoes both. `text`: the King James Bible by default.
 */
export function sentencePieceTokenizerJson(vocabSize: number, text = readKjvText()): object {
  const words = new Map<string, number>();
  const characters = new Map<string, number>();
  for (const line of text.split('\n')) {
    const normalized = SENTENCEPIECE_SPACE + line.replaceAll(' ', SENTENCEPIECE_SPACE);
    for (const word of normalized.match(/\u2581[^\u2581]*/g) ?? []) {
      words.set(word, (words.get(word) ?? 0) + 1);
      for (const c of word) characters.set(c, (characters.get(c) ?? 0) + 1);
    }
  }
  const pieces = [SENTENCEPIECE_UNK, SENTENCEPIECE_BOS, SENTENCEPIECE_EOS];
  for (let b = 0; b < 256; b++) pieces.push(byteToken(b));
  // Most frequent characters first, as SentencePiece orders them.
  const alphabet = [...characters].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
  pieces.push(...alphabet.map(([c]) => c));
  if (vocabSize < pieces.length)
    throw new Error(
      `a SentencePiece-style vocabulary of this text needs at least ${pieces.length} tokens`,
    );
  const vocab = new Map(pieces.map((piece, id) => [piece, id]));
  const merges: [string, string][] = [];
  const addMerge = (a: string, b: string) => {
    if (vocab.has(a + b)) return;
    merges.push([a, b]);
    vocab.set(a + b, pieces.length);
    pieces.push(a + b);
  };
  for (const [a, b] of trainWordBpe(words, vocabSize - pieces.length)) addMerge(a, b);
  fillMerges(pieces, vocabSize, addMerge);
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [SENTENCEPIECE_UNK, SENTENCEPIECE_BOS, SENTENCEPIECE_EOS].map((content, id) => ({
      id,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: {
      type: 'Sequence',
      normalizers: [
        { type: 'Prepend', prepend: SENTENCEPIECE_SPACE },
        { type: 'Replace', pattern: { String: ' ' }, content: SENTENCEPIECE_SPACE },
      ],
    },
    pre_tokenizer: null,
    post_processor: bosProcessor(),
    decoder: {
      type: 'Sequence',
      decoders: [
        { type: 'Replace', pattern: { String: SENTENCEPIECE_SPACE }, content: ' ' },
        { type: 'ByteFallback' },
        { type: 'Fuse' },
        { type: 'Strip', content: ' ', start: 1, stop: 0 },
      ],
    },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: SENTENCEPIECE_UNK,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      vocab: Object.fromEntries(vocab),
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

/**
 * Merges past the text's own, until the vocabulary holds `vocabSize` pieces: runs of `▁`
 * (as Llama's vocabulary has them), then each piece in id order followed by a letter.
 */
function fillMerges(
  pieces: readonly string[],
  vocabSize: number,
  addMerge: (a: string, b: string) => void,
): void {
  for (let run = 1; run < 16 && pieces.length < vocabSize; run++)
    addMerge(SENTENCEPIECE_SPACE.repeat(run), SENTENCEPIECE_SPACE);
  const letters = pieces.filter((piece) => /^[a-z]$/.test(piece));
  // `pieces` grows as merges are added, so this ends.
  for (let id = SPECIAL_AND_BYTES; pieces.length < vocabSize; id++)
    for (const letter of letters) if (pieces.length < vocabSize) addMerge(pieces[id]!, letter);
}

const SPECIAL_AND_BYTES = 3 + 256;

/** Adds `<s>` before a text (and before each of a pair), as Llama's tokenizer does. */
function bosProcessor(): object {
  const bos = { SpecialToken: { id: SENTENCEPIECE_BOS, type_id: 0 } };
  return {
    type: 'TemplateProcessing',
    single: [bos, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [bos, { Sequence: { id: 'A', type_id: 0 } }, bos, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: {
      [SENTENCEPIECE_BOS]: {
        id: SENTENCEPIECE_BOS,
        ids: [SENTENCEPIECE_BOS_ID],
        tokens: [SENTENCEPIECE_BOS],
      },
    },
  };
}

/** tokenizer_config.json beside it: Llama's special tokens, `<s>` added, a chat template. */
export function sentencePieceTokenizerConfig(maxLen: number): object {
  return {
    tokenizer_class: 'LlamaTokenizer',
    bos_token: SENTENCEPIECE_BOS,
    eos_token: SENTENCEPIECE_EOS,
    unk_token: SENTENCEPIECE_UNK,
    pad_token: null,
    add_bos_token: true,
    add_eos_token: false,
    legacy: false,
    clean_up_tokenization_spaces: false,
    model_max_length: maxLen,
    chat_template: SENTENCEPIECE_CHAT_TEMPLATE,
  };
}
