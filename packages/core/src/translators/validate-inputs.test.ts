import { describe, expect, it } from 'vitest';
import { KilnError } from '../errors.js';
import type { TensorDescriptor } from '../model/model.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { describeTensorDescriptor, validateInputs } from './validate-inputs.js';

const INPUTS: TensorDescriptor[] = [
  { name: 'ids', dtype: 'int64', shape: [-1, 8] },
  { name: 'pixels', dtype: 'float32', shape: [-1, 3, 4, 4] },
];

const ids = (name?: string, rows = 1) =>
  new Tensor('int64', new BigInt64Array(rows * 8).fill(7n), [rows, 8], name);
const pixels = (name?: string, shape = [1, 3, 4, 4]) =>
  new Tensor('float32', new Float32Array(shape.reduce((a, b) => a * b, 1)), shape, name);

function failure(fn: () => unknown): KilnError {
  try {
    fn();
  } catch (error) {
    if (error instanceof KilnError) return error;
    throw error;
  }
  throw new Error('expected a KilnError');
}

describe('validateInputs', () => {
  it('orders named tensors like the model inputs', () => {
    const result = validateInputs(NDList.of(pixels('pixels'), ids('ids')), INPUTS);
    expect(result.names).toEqual(['ids', 'pixels']);
    expect(result.get(0).dtype).toBe('int64');
  });

  it('names unnamed tensors by position when the count matches', () => {
    const a = ids();
    const result = validateInputs(NDList.of(a, pixels()), INPUTS);
    expect(result.names).toEqual(['ids', 'pixels']);
    expect(result.get('ids').data).toBe(a.data);
  });

  it('fills the inputs left by named tensors with unnamed ones in order', () => {
    const result = validateInputs(NDList.of(pixels('pixels'), ids()), INPUTS);
    expect(result.names).toEqual(['ids', 'pixels']);
  });

  it('accepts any size in a dynamic dimension', () => {
    const result = validateInputs(NDList.of(ids('ids', 5), pixels('pixels', [5, 3, 4, 4])), INPUTS);
    expect(result.get('ids').shape).toEqual([5, 8]);
  });

  it('rejects an unknown name and lists the expected inputs', () => {
    const error = failure(() =>
      validateInputs(NDList.of(ids('input_ids'), pixels('pixels')), INPUTS),
    );
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toContain('"input_ids"');
    expect(error.message).toContain('ids int64[-1,8]');
    expect(error.message).toContain('pixels float32[-1,3,4,4]');
  });

  it('rejects a missing named input', () => {
    const error = failure(() => validateInputs(NDList.of(ids('ids')), INPUTS));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toContain('missing input "pixels"');
    expect(error.details).toMatchObject({ missing: ['pixels'], expected: ['ids', 'pixels'] });
  });

  it('rejects unnamed tensors when the count differs', () => {
    const error = failure(() => validateInputs(NDList.of(ids()), INPUTS));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/expects 2 inputs .* but got 1/);
  });

  it('rejects the same input twice', () => {
    const error = failure(() => validateInputs(NDList.of(ids('ids'), ids('ids')), INPUTS));
    expect(error.message).toContain('given twice');
  });

  it('rejects a dtype that differs', () => {
    const wrong = new Tensor('float32', new Float32Array(8), [1, 8], 'ids');
    const error = failure(() => validateInputs(NDList.of(wrong, pixels('pixels')), INPUTS));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe('input ids expects int64, got float32');
  });

  it('rejects a wrong rank or fixed dimension with both shapes', () => {
    const rank = failure(() =>
      validateInputs(NDList.of(ids('ids'), pixels('pixels', [3, 4, 4])), INPUTS),
    );
    expect(rank.code).toBe('SHAPE_MISMATCH');
    expect(rank.message).toContain('[-1,3,4,4]');
    expect(rank.message).toContain('[3,4,4]');

    const dim = failure(() =>
      validateInputs(NDList.of(ids('ids'), pixels('pixels', [1, 3, 5, 4])), INPUTS),
    );
    expect(dim.code).toBe('SHAPE_MISMATCH');
    expect(dim.details).toMatchObject({
      input: 'pixels',
      expected: [-1, 3, 4, 4],
      actual: [1, 3, 5, 4],
    });
  });

  it('passes the list through when the model declares no inputs', () => {
    const list = NDList.of(ids());
    expect(validateInputs(list, [])).toBe(list);
  });

  it("binds numpy's positional names (np.savez → arr_0, arr_1) by position", () => {
    const result = validateInputs(NDList.of(ids('arr_0'), pixels('arr_1')), INPUTS);
    expect(result.names).toEqual(['ids', 'pixels']);
    const mixed = validateInputs(NDList.of(pixels('pixels'), ids('arr_0')), INPUTS);
    expect(mixed.names).toEqual(['ids', 'pixels']);
    const one = validateInputs(NDList.of(ids('arr_0')), [INPUTS[0]!]);
    expect(one.names).toEqual(['ids']);
  });

  it('keeps arr_N a real name when the model has an input called so', () => {
    const inputs: TensorDescriptor[] = [
      { name: 'x', dtype: 'int64', shape: [-1, 8] },
      { name: 'arr_0', dtype: 'int64', shape: [-1, 8] },
    ];
    const a = ids('arr_0');
    const result = validateInputs(NDList.of(a, ids()), inputs);
    expect(result.get('arr_0').data).toBe(a.data);
  });

  it('still rejects a real name that matches no input', () => {
    const error = failure(() => validateInputs(NDList.of(ids('arr_0'), pixels('image')), INPUTS));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toContain('unknown input "image"');
  });

  it('accepts any dtype and shape where the model declares none (TorchScript)', () => {
    const undeclared: TensorDescriptor[] = [{ name: 'data_0' }];
    const image = pixels(undefined, [1, 3, 224, 224]);
    expect(validateInputs(NDList.of(image), undeclared).get('data_0').shape).toEqual([
      1, 3, 224, 224,
    ]);
    const bytes = new Tensor('int64', new BigInt64Array(5), [1, 5], 'arr_0');
    expect(validateInputs(NDList.of(bytes), undeclared).get(0).dtype).toBe('int64');
    const scalar: TensorDescriptor[] = [{ name: 's', dtype: 'float32', shape: [] }];
    const error = failure(() => validateInputs(NDList.of(image), scalar));
    expect(error.code).toBe('SHAPE_MISMATCH');
    expect(describeTensorDescriptor(undeclared[0]!)).toBe('data_0 any dtype, any shape');
    expect(describeTensorDescriptor(scalar[0]!)).toBe('s float32[]');
  });
});
