// The decoder folder the LLM benches serve: a Llama-style transformers.js folder from
// @kiln/model-tools (random weights), exported once per size and kept in the OS temp dir, or a
// folder of one's own (--model).
import { existsSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  LLAMA_MODEL_FILE,
  type LlamaDecoderOptions,
  decodeOnnxModel,
  llamaDecoderModel,
  saveOnnxModel,
} from '@kiln/model-tools';

/** The parseArgs options that choose the model. */
export const LLM_MODEL_OPTIONS = {
  /** A transformers.js decoder folder of one's own; default: the Llama-style one below. */
  model: { type: 'string' },
  layers: { type: 'string', default: '8' },
  hidden: { type: 'string', default: '512' },
  heads: { type: 'string', default: '8' },
  'kv-heads': { type: 'string', default: '4' },
  /** Default: 32000, or the most a byte-level BPE tokenizer here holds. */
  vocab: { type: 'string' },
  /** `sentencepiece` (Llama 2's kind) or `byte-bpe` (GPT-2's kind), as llamaDecoderModel writes them. */
  tokenizer: { type: 'string', default: 'sentencepiece' },
  /** The longest sequence: the longest prompt plus the longest output must fit. */
  'max-len': { type: 'string', default: '512' },
} as const;

export interface LlmModelValues {
  readonly model?: string | undefined;
  readonly layers: string;
  readonly hidden: string;
  readonly heads: string;
  readonly 'kv-heads': string;
  readonly vocab?: string | undefined;
  readonly tokenizer: string;
  readonly 'max-len': string;
}

export interface LlmModel {
  readonly dir: string;
  /** One line saying what the model is. */
  readonly description: string;
}

/** byteBpeTokenizerJson's largest vocabulary: 256 bytes, end of text, a space or letter + a letter. */
const BYTE_BPE_MOST = 257 + 27 * 26;

/** The folder the options choose; a generated one is reused when an earlier run wrote it. */
export async function llmModelFrom(
  values: LlmModelValues,
  log: (line: string) => void,
): Promise<LlmModel> {
  if (values.model !== undefined) {
    const dir = resolve(values.model);
    return { dir, description: dir };
  }
  const tokenizer = values.tokenizer as NonNullable<LlamaDecoderOptions['tokenizer']>;
  const options = {
    layers: Number(values.layers),
    hidden: Number(values.hidden),
    heads: Number(values.heads),
    kvHeads: Number(values['kv-heads']),
    vocab: Number(values.vocab ?? (tokenizer === 'byte-bpe' ? BYTE_BPE_MOST : 32000)),
    tokenizer,
    maxLen: Number(values['max-len']),
  } satisfies LlamaDecoderOptions;
  const { layers, hidden, heads, kvHeads, vocab, maxLen } = options;
  const key = `never-ends-l${layers}-h${hidden}-a${heads}-kv${kvHeads}-v${vocab}-${tokenizer}-m${maxLen}`;
  const dir = join(tmpdir(), `kiln-bench-llm-llama-${key}`);
  const description = `Llama-style, random weights: ${layers} layers, hidden ${hidden} (feed-forward ${2 * hidden}), ${heads} query / ${kvHeads} key-value heads, vocabulary ${vocab} (${tokenizer}), ${(parameterCount(options) / 1e6).toFixed(1)}M parameters, float32; the end token's logit is 0, so that no greedy answer ends before its length`;
  const done = join(dir, '.complete');
  if (existsSync(done)) return { dir, description };
  log(`exporting the model to ${dir} (once per size; minutes for the default)`);
  const partial = `${dir}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  const exported = await llamaDecoderModel(partial, options);
  await neverChooseGreedily(join(partial, LLAMA_MODEL_FILE), exported.endOfText);
  await writeFile(join(partial, '.complete'), '');
  await rm(dir, { recursive: true, force: true });
  await rename(partial, dir);
  return { dir, description };
}

/**
 * Zeroes the LM head's column of `token`, so that its logit is always 0: among the random
 * logits of a vocabulary of hundreds, some other is larger, and greedy decoding never picks it.
 * For the end token, every request then generates its drawn length in both servers alike —
 * Kiln's HTTP routes have no parameter to ignore the end token.
 */
const FLOAT = 1;

async function neverChooseGreedily(file: string, token: number): Promise<void> {
  const model = decodeOnnxModel(await readFile(file));
  const graph = model.graph!;
  const head = graph.node!.find((n) => n.opType === 'MatMul' && n.output?.includes('logits'));
  const weights = graph.initializer!.find((t) => t.name === head?.input?.[1]);
  const [hidden, vocab] = (weights?.dims ?? []).map(Number);
  if (!weights?.rawData || weights.dataType !== FLOAT || !hidden || !vocab)
    throw new Error(`${file}: no float MatMul initializer makes the logits`);
  // A copy: the decoded bytes may be a view into the whole file's buffer, at any offset.
  const values = new Float32Array(Uint8Array.from(weights.rawData).buffer);
  for (let row = 0; row < hidden; row++) values[row * vocab + token] = 0;
  weights.rawData = new Uint8Array(values.buffer);
  await saveOnnxModel(file, model);
}

/** Weights of the Llama-style decoder llamaDecoderModel builds (untied embeddings and head). */
function parameterCount(o: {
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  vocab: number;
}): number {
  const kv = (o.hidden / o.heads) * o.kvHeads;
  const attention = 2 * o.hidden * o.hidden + 2 * o.hidden * kv;
  const mlp = 3 * o.hidden * 2 * o.hidden;
  return o.layers * (attention + mlp + 2 * o.hidden) + 2 * o.vocab * o.hidden + o.hidden;
}
