import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  BYTE_BPE_END_OF_TEXT_ID,
  byteBpeTokenizerJson,
  writeByteBpeTokenizer,
} from './byte-bpe-tokenizer.js';
import { runPythonScript } from './python-script.js';

/** The export script: builds the decoder in torch and writes the folder. */
export const GPT2_DECODER_SCRIPT = fileURLToPath(
  new URL('../python/gpt2_decoder.py', import.meta.url),
);

export interface Gpt2DecoderOptions {
  readonly layers?: number;
  /** n_embd. */
  readonly hidden?: number;
  /** n_head. */
  readonly heads?: number;
  /** Vocabulary size of the byte-level BPE tokenizer (byteBpeTokenizerJson); default 512. */
  readonly vocab?: number;
  /** n_positions: the longest sequence. */
  readonly maxLen?: number;
  readonly seed?: number;
  /** Prompts (token ids) whose greedy continuations torch computes with its own KV cache. */
  readonly greedyPrompts?: readonly (readonly number[])[];
  /** New tokens per greedy continuation; default 8. */
  readonly greedyTokens?: number;
}

export interface Gpt2DecoderModel {
  readonly dir: string;
  readonly layers: number;
  readonly heads: number;
  readonly headSize: number;
  readonly vocabSize: number;
  readonly maxLen: number;
  /** `<|endoftext|>`, 256: bos_token_id and eos_token_id. */
  readonly endOfText: number;
  /** Torch's greedy new tokens for each of `greedyPrompts`. */
  readonly greedy: number[][];
}

/**
 * A GPT-2-style decoder (learned positions, LayerNorm, GELU MLP, multi-head attention, tied
 * LM head; train_tiny_gpt.py's model with seeded random weights) built in Debian's
 * python3-torch and exported in Hugging Face Optimum's layout, in a folder as transformers.js
 * reads it: `config.json` (model_type gpt2: n_layer, n_head, n_embd, n_positions,
 * vocab_size), `generation_config.json`, `onnx/model.onnx`, and GPT-2's kind of byte-level
 * BPE `tokenizer.json` + `tokenizer_config.json`. See pythonTorchUnavailable for when it
 * cannot run.
 */
export async function gpt2DecoderModel(
  dir: string,
  options: Gpt2DecoderOptions = {},
): Promise<Gpt2DecoderModel> {
  const layers = options.layers ?? 2;
  const hidden = options.hidden ?? 64;
  const heads = options.heads ?? 4;
  const vocabSize = options.vocab ?? 512;
  const maxLen = options.maxLen ?? 128;
  const endOfText = BYTE_BPE_END_OF_TEXT_ID;
  // Fails before torch starts when the vocabulary cannot hold the tokenizer.
  const tokenizerJson = byteBpeTokenizerJson(vocabSize);
  const args = [
    GPT2_DECODER_SCRIPT,
    ...['--out', dir, '--layers', layers, '--hidden', hidden, '--heads', heads],
    ...['--vocab', vocabSize, '--positions', maxLen, '--seed', options.seed ?? 0],
    ...['--eos', endOfText, '--greedy', JSON.stringify(options.greedyPrompts ?? [])],
    ...['--greedy-tokens', options.greedyTokens ?? 8],
  ].map(String);
  const stdout = await runPythonScript(args);
  const { greedy } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { greedy: number[][] };
  await writeByteBpeTokenizer(dir, tokenizerJson, maxLen);
  await writeFile(
    join(dir, 'serving.properties'),
    'engine=OnnxRuntime\noption.rolling_batch=auto\n',
  );
  return {
    dir,
    layers,
    heads,
    headSize: hidden / heads,
    vocabSize,
    maxLen,
    endOfText,
    greedy,
  };
}
