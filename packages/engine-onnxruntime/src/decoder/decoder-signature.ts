import { KilnError, KilnErrorCode, type TensorDescriptor } from '@kiln/core';

/** The shape of a KV-cache decoder, read from its inputs and outputs. */
export interface DecoderSignature {
  readonly layers: number;
  /** Key/value heads: fewer than the query heads under grouped-query attention. */
  readonly heads: number;
  readonly headSize: number;
  readonly vocabSize: number;
  /** The model takes `use_cache_branch` (Optimum's merged decoder): fed true. */
  readonly useCacheBranch: boolean;
  /** The model takes `num_logits_to_keep` (or `logits_to_keep`): its name, fed all positions. */
  readonly logitsToKeep: string | undefined;
  /** What the pasts and presents hold: float32 (default), or float16 (an fp16 export). */
  readonly cacheType?: CacheType;
  /** The session also hands back each run's new positions alone (see withNewKvOutputs). */
  readonly newKvOutputs?: boolean;
}

/** The KV cache's element type; float16 is held as its raw bits, as Kiln's tensors hold it. */
export type CacheType = 'float32' | 'float16';

/** A cache buffer of `type`. */
export type CacheArray = Float32Array | Uint16Array;

export function cacheArray(type: CacheType, length: number): CacheArray {
  return type === 'float16' ? new Uint16Array(length) : new Float32Array(length);
}

/** What a Hugging Face config.json says of the sizes, for dimensions a model leaves open. */
export interface DecoderSizeHints {
  readonly num_key_value_heads?: number;
  readonly num_attention_heads?: number;
  readonly hidden_size?: number;
  readonly head_dim?: number;
  readonly vocab_size?: number;
}

const REQUIRED_INPUTS = ['input_ids', 'attention_mask', 'position_ids'];
const LOGITS_TO_KEEP = ['num_logits_to_keep', 'logits_to_keep'];

/**
 * Checks that a model is a decoder in Hugging Face Optimum's layout (GPT-2 or Llama style:
 * `past_key_values.{i}.key|value` in, `logits` and `present.{i}.key|value` out) and reads
 * its sizes: from the declared shapes, else from `config` (num_key_value_heads, head_dim or
 * hidden_size / num_attention_heads, vocab_size). Throws UNSUPPORTED_FORMAT naming what is
 * missing otherwise.
 */
export function readDecoderSignature(
  inputs: readonly TensorDescriptor[],
  outputs: readonly TensorDescriptor[],
  config: DecoderSizeHints = {},
): DecoderSignature {
  const unsupported = (what: string) =>
    new KilnError(
      KilnErrorCode.UnsupportedFormat,
      `not a text-generation decoder with a KV cache: ${what}`,
    );
  const inputNames = new Set(inputs.map((d) => d.name));
  const missing = REQUIRED_INPUTS.filter((n) => !inputNames.has(n));
  if (missing.length > 0) throw unsupported(`inputs ${missing.join(', ')} are missing`);
  const pasts = inputs.filter((d) => /^past_key_values\.\d+\.(key|value)$/.test(d.name));
  const layers = pasts.length / 2;
  if (layers < 1 || !Number.isInteger(layers)) throw unsupported('no past_key_values inputs');
  const first = inputs.find((d) => d.name === 'past_key_values.0.key');
  const cacheType = first?.dtype ?? 'float32';
  if (cacheType !== 'float32' && cacheType !== 'float16')
    throw unsupported(`its KV cache is ${cacheType}; float32 and float16 caches are served`);
  const declared = (dim: number | undefined) => (dim !== undefined && dim > 0 ? dim : undefined);
  const heads =
    declared(first?.shape?.[1]) ?? config.num_key_value_heads ?? config.num_attention_heads ?? -1;
  const headSize =
    declared(first?.shape?.[3]) ??
    config.head_dim ??
    (config.hidden_size && config.num_attention_heads
      ? config.hidden_size / config.num_attention_heads
      : -1);
  if (heads < 1 || headSize < 1 || !Number.isInteger(headSize))
    throw unsupported(
      'past_key_values must be [batch, heads, past, head] with fixed heads and head (or config.json must say num_key_value_heads and head_dim)',
    );
  const logits = outputs.find((d) => d.name === 'logits');
  const vocabSize = declared(logits?.shape?.[2]) ?? (logits ? config.vocab_size : undefined) ?? -1;
  if (vocabSize < 1) throw unsupported('output logits [batch, sequence, vocab] is missing');
  for (let i = 0; i < layers; i++) {
    for (const kind of ['key', 'value']) {
      if (!inputNames.has(`past_key_values.${i}.${kind}`))
        throw unsupported(`input past_key_values.${i}.${kind} is missing`);
      if (!outputs.some((d) => d.name === `present.${i}.${kind}`))
        throw unsupported(`output present.${i}.${kind} is missing`);
    }
  }
  return {
    layers,
    heads,
    headSize,
    vocabSize,
    useCacheBranch: inputNames.has('use_cache_branch'),
    logitsToKeep: LOGITS_TO_KEEP.find((n) => inputNames.has(n)),
    cacheType,
  };
}
