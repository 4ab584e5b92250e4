// The two test models the parity check serves both ways: a Llama-style decoder with a
// SentencePiece-style tokenizer and a GPT-2-style one with a byte-level BPE tokenizer, each
// in the folder layout transformers.js reads (config.json, tokenizer.json, onnx/model.onnx).
import { join } from 'node:path';
import { gpt2DecoderModel, llamaDecoderModel } from '@kiln/model-tools';

export interface ParityModel {
  /** The folder's name under the root: transformers.js's model id there. */
  readonly id: string;
  readonly description: string;
  readonly dir: string;
  /** Whether tokenizer_config.json has a chat template. */
  readonly chat: boolean;
}

export interface ParityModelSizes {
  /** The Llama model's SentencePiece vocabulary (trained on the KJV); default 32000. */
  readonly llamaVocab?: number;
  /** The GPT-2 model's byte-level BPE vocabulary; default 512. */
  readonly gpt2Vocab?: number;
  /** Longest sequence of both; default 256 (prompts spelled in byte tokens run long). */
  readonly maxLen?: number;
}

/** Writes both models under `root` (needs python3-torch and bible-kjv). */
export async function makeParityModels(
  root: string,
  sizes: ParityModelSizes = {},
): Promise<ParityModel[]> {
  const maxLen = sizes.maxLen ?? 256;
  const llama = await llamaDecoderModel(join(root, 'llama-sentencepiece'), {
    tokenizer: 'sentencepiece',
    vocab: sizes.llamaVocab ?? 32000,
    maxLen,
  });
  const gpt2 = await gpt2DecoderModel(join(root, 'gpt2-byte-bpe'), {
    vocab: sizes.gpt2Vocab ?? 512,
    maxLen,
  });
  return [
    {
      id: 'llama-sentencepiece',
      description: `Llama-style, SentencePiece BPE + byte fallback, vocabulary ${llama.vocabSize}`,
      dir: llama.dir,
      chat: true,
    },
    {
      id: 'gpt2-byte-bpe',
      description: `GPT-2-style, byte-level BPE, vocabulary ${gpt2.vocabSize}`,
      dir: gpt2.dir,
      chat: false,
    },
  ];
}
