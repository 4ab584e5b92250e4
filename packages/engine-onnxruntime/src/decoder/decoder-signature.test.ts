import type { TensorDescriptor } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { readDecoderSignature } from './decoder-signature.js';

/** A Llama-style decoder's inputs and outputs, its pasts' heads and head size as given. */
function decoder(
  pastShape: number[],
  { dtype = 'float32', extra = [] as string[] } = {},
): { inputs: TensorDescriptor[]; outputs: TensorDescriptor[] } {
  const inputs: TensorDescriptor[] = [
    { name: 'input_ids', dtype: 'int64', shape: [-1, -1] },
    { name: 'attention_mask', dtype: 'int64', shape: [-1, -1] },
    { name: 'position_ids', dtype: 'int64', shape: [-1, -1] },
  ];
  const outputs: TensorDescriptor[] = [{ name: 'logits', dtype: 'float32', shape: [-1, -1, 32] }];
  for (let i = 0; i < 2; i++) {
    for (const kind of ['key', 'value']) {
      inputs.push({
        name: `past_key_values.${i}.${kind}`,
        dtype: dtype as 'float32',
        shape: pastShape,
      });
      outputs.push({ name: `present.${i}.${kind}`, dtype: dtype as 'float32', shape: pastShape });
    }
  }
  for (const name of extra) inputs.push({ name, dtype: 'int64', shape: [] });
  return { inputs, outputs };
}

describe('readDecoderSignature', () => {
  it('reads key/value heads and head size from the pasts', () => {
    const { inputs, outputs } = decoder([-1, 2, -1, 16]);
    expect(readDecoderSignature(inputs, outputs, { num_key_value_heads: 8 })).toEqual({
      layers: 2,
      heads: 2,
      headSize: 16,
      vocabSize: 32,
      useCacheBranch: false,
      logitsToKeep: undefined,
      cacheType: 'float32',
    });
  });

  it("takes config.json's num_key_value_heads and head size where the export leaves them open", () => {
    const { inputs, outputs } = decoder([-1, -1, -1, -1]);
    const llama = { num_attention_heads: 8, num_key_value_heads: 2, hidden_size: 64 };
    expect(readDecoderSignature(inputs, outputs, llama)).toMatchObject({ heads: 2, headSize: 8 });
    expect(readDecoderSignature(inputs, outputs, { ...llama, head_dim: 4 })).toMatchObject({
      headSize: 4,
    });
    // Without num_key_value_heads every query head has its own.
    expect(
      readDecoderSignature(inputs, outputs, { num_attention_heads: 8, hidden_size: 64 }),
    ).toMatchObject({ heads: 8, headSize: 8 });
    expect(() => readDecoderSignature(inputs, outputs)).toThrow(/num_key_value_heads/);
  });

  it('notes the merged decoder and logits-to-keep inputs', () => {
    const { inputs, outputs } = decoder([-1, 2, -1, 16], {
      extra: ['use_cache_branch', 'logits_to_keep'],
    });
    expect(readDecoderSignature(inputs, outputs)).toMatchObject({
      useCacheBranch: true,
      logitsToKeep: 'logits_to_keep',
    });
  });

  it('reads a float16 KV cache (an fp16 export) and refuses other types by name', () => {
    const half = decoder([-1, 2, -1, 16], { dtype: 'float16' });
    expect(readDecoderSignature(half.inputs, half.outputs).cacheType).toBe('float16');
    const plain = decoder([-1, 2, -1, 16]);
    expect(readDecoderSignature(plain.inputs, plain.outputs).cacheType).toBe('float32');
    const { inputs, outputs } = decoder([-1, 2, -1, 16], { dtype: 'bfloat16' });
    expect(() => readDecoderSignature(inputs, outputs)).toThrow(
      expect.objectContaining({
        code: 'UNSUPPORTED_FORMAT',
        message: expect.stringMatching(/bfloat16/),
      }),
    );
  });
});
