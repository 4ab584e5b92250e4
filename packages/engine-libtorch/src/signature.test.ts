import { describe, expect, it } from 'vitest';
import { formatSignature, parseSignature, signatureFromSchema } from './signature.js';

describe('signature', () => {
  it('round-trips through its stored form', () => {
    const signature = {
      inputs: [{ name: 'x', dtype: 'bfloat16' as const, shape: [-1, 4] }],
      outputs: [{ name: 'y', dtype: 'int64' as const, shape: [] }],
    };
    expect(parseSignature(formatSignature(signature), 'm.pt')).toEqual(signature);
  });

  it('fails the load on a malformed stored signature', () => {
    for (const text of [
      '{',
      '{"inputs":[]}',
      '{"inputs":[{"name":"x","dtype":"f32","shape":[1]}],"outputs":[]}',
    ]) {
      expect(() => parseSignature(text, 'm.pt')).toThrow(
        expect.objectContaining({ code: 'MODEL_LOAD_FAILED' }),
      );
    }
  });

  it('takes tensor argument names from the schema when nothing is stored', () => {
    const signature = signatureFromSchema([
      { name: 'x', type: 'Tensor' },
      { name: 'mask', type: 'Optional[Tensor]' },
      { name: 'scale', type: 'float' },
    ]);
    expect(signature.inputs.map((d) => d.name)).toEqual(['x', 'mask']);
    expect(signature.outputs).toEqual([]);
  });
});
