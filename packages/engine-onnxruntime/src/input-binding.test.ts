import { KilnError, NDList, Tensor, type TensorDescriptor } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import { bindInputs } from './input-binding.js';

const inputs: TensorDescriptor[] = [
  { name: 'ids', dtype: 'int64', shape: [-1, -1] },
  { name: 'scale', dtype: 'float32', shape: [1] },
];
const ids = (name?: string) => new Tensor('int64', new BigInt64Array(6), [2, 3], name);
const scale = (name?: string) => new Tensor('float32', Float32Array.of(2), [1], name);

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return error instanceof KilnError ? error.code : 'not a KilnError';
  }
  return undefined;
}

describe('bindInputs', () => {
  it('binds by name in any order, and unnamed tensors by position', () => {
    const [a, b] = bindInputs(NDList.of(scale('scale'), ids('ids')), inputs);
    expect(a!.name).toBe('ids');
    expect(b!.name).toBe('scale');
    const [c, d] = bindInputs(NDList.of(ids(), scale()), inputs);
    expect([c!.dtype, d!.dtype]).toEqual(['int64', 'float32']);
    const [e, f] = bindInputs(NDList.of(scale('scale'), ids('tokens')), inputs);
    expect([e!.name, f!.name]).toEqual(['tokens', 'scale']);
  });

  it('gives stable codes for inputs the model cannot take', () => {
    expect(codeOf(() => bindInputs(NDList.of(ids('ids')), inputs))).toBe('INVALID_INPUT');
    expect(
      codeOf(() => bindInputs(NDList.of(ids('ids'), scale('scale'), scale('x')), inputs)),
    ).toBe('INVALID_INPUT');
    expect(codeOf(() => bindInputs(NDList.of(ids('ids'), ids('ids')), inputs))).toBe(
      'INVALID_INPUT',
    );
    expect(
      codeOf(() =>
        bindInputs(
          NDList.of(new Tensor('int32', new Int32Array(6), [2, 3], 'ids'), scale('scale')),
          inputs,
        ),
      ),
    ).toBe('INVALID_INPUT');
    expect(
      codeOf(() =>
        bindInputs(
          NDList.of(new Tensor('int64', new BigInt64Array(6), [6], 'ids'), scale('scale')),
          inputs,
        ),
      ),
    ).toBe('SHAPE_MISMATCH');
    expect(
      codeOf(() =>
        bindInputs(
          NDList.of(ids('ids'), new Tensor('float32', new Float32Array(2), [2], 'scale')),
          inputs,
        ),
      ),
    ).toBe('SHAPE_MISMATCH');
  });
});
