import { attr } from './attributes.js';
import { GraphBuilder } from './graph-builder.js';
import { writeModelFolder } from './model-folder.js';
import { SeededRandom } from './random.js';

export interface TransformerEncoderOptions {
  readonly layers: number;
  readonly hidden: number;
  readonly heads: number;
  /** Longest sequence the position embeddings cover. */
  readonly maxLen: number;
  /** 30522 like BERT's WordPiece vocabulary by default. */
  readonly vocabSize?: number;
  /** Feed-forward width; 4 × hidden by default. */
  readonly intermediate?: number;
  readonly seed?: number;
}

export interface TransformerEncoderModel {
  readonly dir: string;
  readonly hidden: number;
  readonly maxLen: number;
  readonly vocabSize: number;
}

/**
 * A BERT-style encoder from plain ONNX ops: `input_ids`, `attention_mask` int64
 * [batch, sequence] → `last_hidden_state` float32 [batch, sequence, hidden]. Batch and
 * sequence length are both dynamic; masked positions get a −10000 bias before Softmax, so
 * padding does not change the unpadded positions' outputs. GELU is the exact Erf form.
 */
export async function transformerEncoderModel(
  dir: string,
  options: TransformerEncoderOptions,
): Promise<TransformerEncoderModel> {
  const { layers, hidden, heads, maxLen } = options;
  if (hidden % heads !== 0)
    throw new Error(`hidden (${hidden}) must be a multiple of heads (${heads})`);
  const vocabSize = options.vocabSize ?? 30522;
  const e = new EncoderBuilder(
    new SeededRandom(options.seed ?? 11),
    hidden,
    heads,
    options.intermediate ?? 4 * hidden,
  );
  const g = e.g;
  g.input('input_ids', 'int64', ['batch', 'sequence']);
  g.input('attention_mask', 'int64', ['batch', 'sequence']);

  const words = g.op('Gather', [e.weight('word_embeddings', [vocabSize, hidden]), 'input_ids']);
  const sequence = g.op('Gather', [g.op('Shape', ['input_ids']), g.int64s('axis1', [1], [])], {
    axis: attr.int(0),
  });
  const positions = g.op('Range', [g.int64s('zero', [0], []), sequence, g.int64s('one', [1], [])]);
  const positionEmbeddings = g.op('Gather', [
    e.weight('position_embeddings', [maxLen, hidden]),
    positions,
  ]);
  const tokenType = e.weight('token_type_embedding', [hidden]);
  let h = e.layerNorm(g.op('Add', [g.op('Add', [words, positionEmbeddings]), tokenType]));

  // [batch, sequence] mask → [batch, 1, 1, sequence] additive bias: 0 to keep, −10000 to mask.
  const mask = g.op('Cast', ['attention_mask'], { to: attr.int(1) });
  const masked = g.op('Sub', [g.scalar('one_f', 1), mask]);
  const maskBias = g.op('Unsqueeze', [
    g.op('Mul', [masked, g.scalar('mask_value', -10000)]),
    g.int64s('axes', [1, 2]),
  ]);

  for (let i = 0; i < layers; i++)
    h = e.layer(h, maskBias, i === layers - 1 ? 'last_hidden_state' : undefined);
  if (layers === 0) g.op('Identity', [h], {}, { output: 'last_hidden_state' });
  g.output('last_hidden_state', 'float32', ['batch', 'sequence', hidden]);
  await writeModelFolder(
    dir,
    g.toModel({
      docString: `encoder: ${layers} layers, hidden ${hidden}, ${heads} heads, seeded random weights`,
    }),
  );
  return { dir, hidden, maxLen, vocabSize };
}

class EncoderBuilder {
  readonly g = new GraphBuilder('transformer_encoder');
  private readonly headSize: number;

  constructor(
    private readonly random: SeededRandom,
    private readonly hidden: number,
    private readonly heads: number,
    private readonly intermediate: number,
  ) {
    this.headSize = hidden / heads;
  }

  /** BERT's initialisation: N(0, 0.02). */
  weight(prefix: string, dims: readonly number[]): string {
    const size = dims.reduce((a, b) => a * b, 1);
    return this.g.weight(prefix, dims, this.random.normalArray(size, 0.02));
  }

  layerNorm(x: string, output?: string): string {
    const gamma = this.g.weight('ln_gamma', [this.hidden], new Float32Array(this.hidden).fill(1));
    const beta = this.g.weight('ln_beta', [this.hidden], new Float32Array(this.hidden));
    return this.g.op(
      'LayerNormalization',
      [x, gamma, beta],
      { axis: attr.int(-1), epsilon: attr.float(1e-12) },
      output ? { output } : {},
    );
  }

  layer(x: string, maskBias: string, output?: string): string {
    const g = this.g;
    const attention = g.op('Add', [this.selfAttention(x, maskBias), x]);
    const h = this.layerNorm(attention);
    const up = this.linear(h, this.hidden, this.intermediate);
    const down = this.linear(this.gelu(up), this.intermediate, this.hidden);
    return this.layerNorm(g.op('Add', [down, h]), output);
  }

  private selfAttention(x: string, maskBias: string): string {
    const g = this.g;
    const split = g.int64s('heads_shape', [0, 0, this.heads, this.headSize]);
    const heads = (perm: number[]): string =>
      g.op('Transpose', [g.op('Reshape', [this.linear(x, this.hidden, this.hidden), split])], {
        perm: attr.ints(perm),
      });
    const q = heads([0, 2, 1, 3]);
    const kT = heads([0, 2, 3, 1]);
    const v = heads([0, 2, 1, 3]);
    const scores = g.op('Div', [
      g.op('MatMul', [q, kT]),
      g.scalar('sqrt_head', Math.sqrt(this.headSize)),
    ]);
    const probs = g.op('Softmax', [g.op('Add', [scores, maskBias])], { axis: attr.int(-1) });
    const context = g.op('Transpose', [g.op('MatMul', [probs, v])], {
      perm: attr.ints([0, 2, 1, 3]),
    });
    const merged = g.op('Reshape', [context, g.int64s('merge_shape', [0, 0, this.hidden])]);
    return this.linear(merged, this.hidden, this.hidden);
  }

  private linear(x: string, inputs: number, outputs: number): string {
    const w = this.weight('linear_weight', [inputs, outputs]);
    const b = this.g.weight('linear_bias', [outputs], new Float32Array(outputs));
    return this.g.op('Add', [this.g.op('MatMul', [x, w]), b]);
  }

  /** x · 0.5 · (1 + erf(x / √2)), the form ONNX Runtime fuses into one Gelu kernel. */
  private gelu(x: string): string {
    const g = this.g;
    const erf = g.op('Erf', [g.op('Div', [x, g.scalar('sqrt2', Math.SQRT2)])]);
    return g.op('Mul', [
      g.op('Mul', [x, g.op('Add', [erf, g.scalar('one_f', 1)])]),
      g.scalar('half', 0.5),
    ]);
  }
}
