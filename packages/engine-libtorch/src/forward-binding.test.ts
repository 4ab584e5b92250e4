import { describe, expect, it } from 'vitest';
import { KilnError, NDList, Tensor, type TensorDescriptor } from '@kiln/core';
import type { ArgumentDescription, HostTensor, NativeValue } from '@kiln/libtorch-native';
import { forwardArguments, flattenOutputs } from './forward-binding.js';

const arg = (name: string, type = 'Tensor', hasDefault = false): ArgumentDescription => ({
  name,
  type,
  hasDefault,
});
const f32 = (values: number[], name?: string) =>
  new Tensor('float32', Float32Array.from(values), [values.length], name);
const host = (values: number[]): HostTensor => ({
  dtype: 'float32',
  shape: [values.length],
  data: Float32Array.from(values),
});
const valuesOf = (value: NativeValue) => Array.from((value as HostTensor).data as Float32Array);

describe('forwardArguments', () => {
  it('binds named tensors to arguments by name, whatever their order', () => {
    const args = forwardArguments(
      NDList.of(f32([2], 'b'), f32([1], 'a')),
      [arg('a'), arg('b')],
      undefined,
    );
    expect(args.map(valuesOf)).toEqual([[1], [2]]);
  });

  it('binds unnamed tensors by position and refuses too many', () => {
    expect(
      forwardArguments(NDList.of(f32([1]), f32([2])), [arg('a'), arg('b')], undefined).map(
        valuesOf,
      ),
    ).toEqual([[1], [2]]);
    expect(() => forwardArguments(NDList.of(f32([1]), f32([2])), [arg('a')], undefined)).toThrow(
      /takes 1 inputs/,
    );
  });

  it('names a missing input, allowing trailing arguments with defaults', () => {
    expect(() =>
      forwardArguments(NDList.of(f32([1], 'a')), [arg('a'), arg('b')], undefined),
    ).toThrow('input b is missing');
    expect(
      forwardArguments(
        NDList.of(f32([1], 'a')),
        [arg('a'), arg('scale', 'float', true)],
        undefined,
      ),
    ).toHaveLength(1);
    expect(() =>
      forwardArguments(NDList.of(f32([1], 'b')), [arg('a', 'Tensor'), arg('b')], undefined),
    ).toThrow('input a is missing');
  });

  it('packs all tensors into one tuple, list or dict argument', () => {
    const list = NDList.of(f32([1], 'p'), f32([2], 'q'));
    expect(
      (
        forwardArguments(list, [arg('xs', 'Tuple[Tensor, Tensor]')], undefined)[0] as NativeValue[]
      ).map(valuesOf),
    ).toEqual([[1], [2]]);
    expect(forwardArguments(list, [arg('xs', 'List[Tensor]')], undefined)[0]).toHaveLength(2);
    const dict = forwardArguments(
      list,
      [arg('inputs', 'Dict[str, Tensor]')],
      undefined,
    )[0] as Record<string, NativeValue>;
    expect(Object.keys(dict)).toEqual(['p', 'q']);
    expect(() =>
      forwardArguments(NDList.of(f32([1])), [arg('inputs', 'Dict[str, Tensor]')], undefined),
    ).toThrow(/needs a name/);
  });

  it('checks dtypes and shapes against a declared signature', () => {
    const declared: TensorDescriptor[] = [{ name: 'x', dtype: 'float32', shape: [-1, 2] }];
    const int = new Tensor('int32', new Int32Array(2), [1, 2], 'x');
    expect(() => forwardArguments(NDList.of(int), [arg('x')], declared)).toThrow(
      expect.objectContaining({
        code: 'INVALID_INPUT',
        message: 'input x expects float32, got int32',
      }),
    );
    const wide = new Tensor('float32', new Float32Array(3), [1, 3], 'x');
    expect(() => forwardArguments(NDList.of(wide), [arg('x')], declared)).toThrow(
      expect.objectContaining({ code: 'SHAPE_MISMATCH' }),
    );
    expect(() => forwardArguments(NDList.of(f32([1], 'z')), [arg('x')], declared)).toThrow(
      'the model has no input named z (it takes x)',
    );
  });

  it('refuses string tensors, which LibTorch cannot hold', () => {
    const strings = new Tensor('string', ['a'], [1], 'x');
    expect(() => forwardArguments(NDList.of(strings), [arg('x')], undefined)).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_DTYPE' }),
    );
  });
});

describe('flattenOutputs', () => {
  it('flattens depth first, naming dict values by key and nested ones by path', () => {
    const list = flattenOutputs(
      [host([1]), { a: host([2]), b: [host([3]), { c: host([4]) }] }, [host([5])]],
      undefined,
    );
    expect(list.names).toEqual([undefined, 'a', 'b.0', 'b.1.c', undefined]);
    expect(list.tensors.map((t) => (t.data as Float32Array)[0])).toEqual([1, 2, 3, 4, 5]);
  });

  it('turns scalars into 0-d tensors and skips None', () => {
    const list = flattenOutputs([1.5, 7n, true, 'label', null], undefined);
    expect(list.tensors.map((t) => [t.dtype, t.rank, t.at(0)])).toEqual([
      ['float64', 0, 1.5],
      ['int64', 0, 7n],
      ['bool', 0, true],
      ['string', 0, 'label'],
    ]);
  });

  it('gives unnamed outputs the declared names when the counts agree', () => {
    const declared: TensorDescriptor[] = [
      { name: 'scores', dtype: 'float32', shape: [-1] },
      { name: 'boxes', dtype: 'float32', shape: [-1] },
    ];
    expect(flattenOutputs([host([1]), host([2])], declared).names).toEqual(['scores', 'boxes']);
    expect(flattenOutputs([host([1])], declared).names).toEqual([undefined]);
  });

  it('reports a native tensor that reached host flattening as an internal error', () => {
    const wrap = {
      dtype: 'float32',
      shape: [1],
      device: 'cpu',
      disposed: false,
      toHost: async () => host([1]),
      dispose() {},
    };
    expect(() => flattenOutputs(wrap, undefined)).toThrow(KilnError);
  });
});
