import { KilnError, KilnErrorCode, type TensorDescriptor } from '@kiln/core';

/** The shape of a KV-cache decoder, read from its inputs and outputs. */
export interface DecoderSignature {
  readonly layers: number;
  readonly heads: number;
  readonly headSize: number;
  readonly vocabSize: number;
}

const REQUIRED_INPUTS = ['input_ids', 'attention_mask', 'position_ids'];

/**
 * Checks that a model is a GPT-2-style decoder in Hugging Face Optimum's layout
 * (`past_key_values.{i}.key|value` in, `logits` and `present.{i}.key|value` out) and reads
 * its sizes. Throws UNSUPPORTED_FORMAT naming what is missing otherwise.
 */
export function readDecoderSignature(
  inputs: readonly TensorDescriptor[],
  outputs: readonly TensorDescriptor[],
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
  const heads = first?.shape?.[1] ?? -1;
  const headSize = first?.shape?.[3] ?? -1;
  if (heads < 1 || headSize < 1)
    throw unsupported(
      'past_key_values must be [batch, heads, past, head] with fixed heads and head',
    );
  const logits = outputs.find((d) => d.name === 'logits');
  const vocabSize = logits?.shape?.[2] ?? -1;
  if (vocabSize < 1) throw unsupported('output logits [batch, sequence, vocab] is missing');
  for (let i = 0; i < layers; i++) {
    for (const kind of ['key', 'value']) {
      if (!inputNames.has(`past_key_values.${i}.${kind}`))
        throw unsupported(`input past_key_values.${i}.${kind} is missing`);
      if (!outputs.some((d) => d.name === `present.${i}.${kind}`))
        throw unsupported(`output present.${i}.${kind} is missing`);
    }
  }
  return { layers, heads, headSize, vocabSize };
}
