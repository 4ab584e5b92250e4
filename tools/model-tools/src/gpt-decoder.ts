import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { attr } from './attributes.js';
import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';
import { SeededRandom } from './random.js';

/** The file a decoder folder keeps its character vocabulary in: a JSON array, id → text. */
export const CHAR_VOCAB_FILE = 'vocab.json';
/** Token 0 of a character vocabulary: ends a sequence. */
export const END_OF_TEXT = '<|endoftext|>';

/** End of text, newline, then printable ASCII: 97 tokens. */
export function defaultCharVocab(): string[] {
  const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i));
  return [END_OF_TEXT, '\n', ...printable];
}

export interface GptDecoderOptions {
  readonly layers: number;
  readonly hidden: number;
  readonly heads: number;
  /** Longest sequence (prompt + output) the position embeddings cover. */
  readonly maxLen: number;
  /**
   * Width of queries, keys and values (heads × head size); default `hidden`. A narrower one
   * keeps the KV cache small beside the weights.
   */
  readonly attentionDim?: number;
  /** Token texts, id order; `defaultCharVocab()` by default. */
  readonly vocab?: readonly string[];
  /**
   * Spread of the output projection. Random weights give near-flat logits; a larger spread
   * keeps the top tokens apart, so greedy decoding does not hinge on rounding. Default 0.5.
   */
  readonly logitStd?: number;
  readonly seed?: number;
  /** Extra serving.properties entries. */
  readonly properties?: Readonly<Record<string, string>>;
}

export interface GptDecoderModel {
  readonly dir: string;
  readonly layers: number;
  readonly heads: number;
  readonly headSize: number;
  readonly vocabSize: number;
  readonly maxLen: number;
}

/**
 * A GPT-2-style decoder with a KV cache, in the input/output layout Hugging Face Optimum
 * exports: `input_ids`, `position_ids` int64 [batch, sequence], `attention_mask` int64
 * [batch, past_sequence + sequence], `past_key_values.{i}.key|value` float32
 * [batch, heads, past_sequence, head] → `logits` [batch, sequence, vocab] and
 * `present.{i}.key|value` [batch, heads, past_sequence + sequence, head]. Attention is causal
 * over the concatenated positions and skips those whose mask is 0, so a batch may left-pad
 * its pasts and right-pad its new tokens. Pre-LayerNorm blocks, exact GELU, seeded weights.
 * The folder also holds `vocab.json` (a character vocabulary, token 0 ends text) and a
 * Hugging Face style `config.json` (`n_positions`, `vocab_size`, `eos_token_id`).
 */
export async function gptDecoderModel(
  dir: string,
  options: GptDecoderOptions,
): Promise<GptDecoderModel> {
  const { layers, hidden, heads, maxLen } = options;
  const attentionDim = options.attentionDim ?? hidden;
  if (attentionDim % heads !== 0)
    throw new Error(`attention width (${attentionDim}) must be a multiple of heads (${heads})`);
  const vocab = options.vocab ?? defaultCharVocab();
  const headSize = attentionDim / heads;
  const random = new SeededRandom(options.seed ?? 17);
  const g = new GraphBuilder('gpt_decoder');
  const weight = (prefix: string, dims: number[], std = 0.02) =>
    g.weight(
      prefix,
      dims,
      random.normalArray(
        dims.reduce((a, b) => a * b, 1),
        std,
      ),
    );
  const linear = (x: string, inputs: number, outputs: number) =>
    g.op('Add', [
      g.op('MatMul', [x, weight('linear_weight', [inputs, outputs])]),
      g.weight('linear_bias', [outputs], new Float32Array(outputs)),
    ]);
  const layerNorm = (x: string) =>
    g.op(
      'LayerNormalization',
      [
        x,
        g.weight('ln_gamma', [hidden], new Float32Array(hidden).fill(1)),
        g.weight('ln_beta', [hidden], new Float32Array(hidden)),
      ],
      { axis: attr.int(-1), epsilon: attr.float(1e-5) },
    );

  g.input('input_ids', 'int64', ['batch', 'sequence']);
  g.input('attention_mask', 'int64', ['batch', 'total_sequence']);
  g.input('position_ids', 'int64', ['batch', 'sequence']);
  for (let i = 0; i < layers; i++)
    for (const kind of ['key', 'value'])
      g.input(`past_key_values.${i}.${kind}`, 'float32', [
        'batch',
        heads,
        'past_sequence',
        headSize,
      ]);

  let h = g.op('Add', [
    g.op('Gather', [weight('wte', [vocab.length, hidden], 0.1), 'input_ids']),
    g.op('Gather', [weight('wpe', [maxLen, hidden], 0.1), 'position_ids']),
  ]);

  // Additive bias [batch, 1, sequence, total]: 0 where a query may look, −10000 elsewhere.
  const dim = (tensor: string, axis: number) =>
    g.op('Gather', [g.op('Shape', [tensor]), g.int64s('axis', [axis], [])], { axis: attr.int(0) });
  const total = dim('attention_mask', 1);
  const past = g.op('Sub', [total, dim('input_ids', 1)]);
  const one = g.int64s('one', [1], []);
  const keys = g.op('Range', [g.int64s('zero', [0], []), total, one]);
  const queries = g.op('Unsqueeze', [g.op('Range', [past, total, one]), g.int64s('axes', [1])]);
  const causal = g.op('Cast', [g.op('LessOrEqual', [keys, queries])], { to: attr.int(1) });
  const padding = g.op('Unsqueeze', [
    g.op('Cast', ['attention_mask'], { to: attr.int(1) }),
    g.int64s('axes', [1, 2]),
  ]);
  const allowed = g.op('Mul', [causal, padding]);
  const bias = g.op('Mul', [g.op('Sub', [allowed, g.scalar('one_f', 1)]), g.scalar('big', 10000)]);

  const splitHeads = g.int64s('heads_shape', [0, 0, heads, headSize]);
  const toHeads = (x: string) =>
    g.op('Transpose', [g.op('Reshape', [x, splitHeads])], { perm: attr.ints([0, 2, 1, 3]) });
  for (let i = 0; i < layers; i++) {
    const a = layerNorm(h);
    const q = toHeads(linear(a, hidden, attentionDim));
    const k = g.op(
      'Concat',
      [`past_key_values.${i}.key`, toHeads(linear(a, hidden, attentionDim))],
      { axis: attr.int(2) },
      { output: `present.${i}.key` },
    );
    const v = g.op(
      'Concat',
      [`past_key_values.${i}.value`, toHeads(linear(a, hidden, attentionDim))],
      { axis: attr.int(2) },
      { output: `present.${i}.value` },
    );
    const scores = g.op('Div', [
      g.op('MatMul', [q, g.op('Transpose', [k], { perm: attr.ints([0, 1, 3, 2]) })]),
      g.scalar('sqrt_head', Math.sqrt(headSize)),
    ]);
    const probs = g.op('Softmax', [g.op('Add', [scores, bias])], { axis: attr.int(-1) });
    const context = g.op('Transpose', [g.op('MatMul', [probs, v])], {
      perm: attr.ints([0, 2, 1, 3]),
    });
    const merged = g.op('Reshape', [context, g.int64s('merge_shape', [0, 0, attentionDim])]);
    h = g.op('Add', [h, linear(merged, attentionDim, hidden)]);
    const m = layerNorm(h);
    const up = linear(m, hidden, 4 * hidden);
    const erf = g.op('Erf', [g.op('Div', [up, g.scalar('sqrt2', Math.SQRT2)])]);
    const gelu = g.op('Mul', [
      g.op('Mul', [up, g.op('Add', [erf, g.scalar('one_f', 1)])]),
      g.scalar('half', 0.5),
    ]);
    h = g.op('Add', [h, linear(gelu, 4 * hidden, hidden)]);
  }
  g.op(
    'MatMul',
    [layerNorm(h), weight('lm_head', [hidden, vocab.length], options.logitStd ?? 0.5)],
    {},
    { output: 'logits' },
  );
  g.output('logits', 'float32', ['batch', 'sequence', vocab.length]);
  for (let i = 0; i < layers; i++)
    for (const kind of ['key', 'value'])
      g.output(`present.${i}.${kind}`, 'float32', ['batch', heads, 'total_sequence', headSize]);

  await writeModelFolder(
    dir,
    g.toModel({
      docString: `GPT-style decoder: ${layers} layers, hidden ${hidden}, ${heads} heads, seeded random weights`,
    }),
    { 'option.rolling_batch': 'auto', ...options.properties },
  );
  await writeFile(join(dir, CHAR_VOCAB_FILE), `${JSON.stringify(vocab)}\n`);
  // Hugging Face's names, so that loaders read these models and exported ones alike.
  const config = {
    model_type: 'gpt2',
    n_positions: maxLen,
    vocab_size: vocab.length,
    eos_token_id: 0,
  };
  await writeFile(join(dir, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  return { dir, layers, heads, headSize, vocabSize: vocab.length, maxLen };
}
