import {
  type AnyTensor,
  CPU,
  type DType,
  type ExecutionContext,
  KilnErrorCode,
  type Model,
  NDList,
  Predictor,
  Tensor,
  type Translator,
  fromFloat16Bits,
  servingPropertiesFrom,
  toBfloat16Bits,
  toFloat16Bits,
} from '@kiln/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PadBatchifier } from './pad-batchifier.js';

const int64 = (shape: number[], values: number[], name?: string) =>
  new Tensor('int64', BigInt64Array.from(values.map(BigInt)), shape, name);
const f32 = (shape: number[], values: number[], name?: string) =>
  new Tensor('float32', Float32Array.from(values), shape, name);
const sequence = (ids: number[]) =>
  NDList.of(
    int64([1, ids.length], ids, 'input_ids'),
    int64(
      [1, ids.length],
      ids.map(() => 1),
      'attention_mask',
    ),
  );
const nested = (t: AnyTensor) => t.toNested();

describe('PadBatchifier batchify', () => {
  it('pads every tensor to the batch maximum and stacks the rows', () => {
    const batch = new PadBatchifier().batchify([
      sequence([5, 6]),
      sequence([7, 8, 9, 10]),
      sequence([11]),
    ]);
    const [ids, mask] = batch.input.tensors;
    expect(ids!.shape).toEqual([3, 4]);
    expect(nested(ids!)).toEqual([
      [5, 6, 0, 0],
      [7, 8, 9, 10],
      [11, 0, 0, 0],
    ]);
    expect(nested(mask!)).toEqual([
      [1, 1, 0, 0],
      [1, 1, 1, 1],
      [1, 0, 0, 0],
    ]);
    expect(batch.input.names).toEqual(['input_ids', 'attention_mask']);
  });

  it('keeps inputs of several rows together', () => {
    const a = NDList.of(f32([2, 1], [1, 2], 'x'));
    const b = NDList.of(f32([1, 3], [3, 4, 5], 'x'));
    const batch = new PadBatchifier({ padValue: -1 }).batchify([a, b]);
    expect(nested(batch.input.get('x'))).toEqual([
      [1, -1, -1],
      [2, -1, -1],
      [3, 4, 5],
    ]);
  });

  it('takes pad values per input name, 0 for the rest', () => {
    const list = (n: number) =>
      NDList.of(
        f32([1, n], new Array<number>(n).fill(7), 'a'),
        f32([1, n], new Array<number>(n).fill(7), 'b'),
      );
    const batch = new PadBatchifier({ padValue: { a: -3 } }).batchify([list(1), list(2)]);
    expect(nested(batch.input.get('a'))).toEqual([
      [7, -3],
      [7, 7],
    ]);
    expect(nested(batch.input.get('b'))).toEqual([
      [7, 0],
      [7, 7],
    ]);
  });

  it('pads several axes of image-like tensors', () => {
    const image = (h: number, w: number, base: number) =>
      NDList.of(
        f32(
          [1, 1, h, w],
          Array.from({ length: h * w }, (_, i) => base + i),
          'pixels',
        ),
      );
    const batch = new PadBatchifier({ axes: [2, 3] }).batchify([image(1, 3, 10), image(2, 2, 20)]);
    expect(nested(batch.input.get('pixels'))).toEqual([
      [
        [
          [10, 11, 12],
          [0, 0, 0],
        ],
      ],
      [
        [
          [20, 21, 0],
          [22, 23, 0],
        ],
      ],
    ]);
  });

  it('keeps int64 values beyond 32 bits exact', () => {
    const big = Number.MAX_SAFE_INTEGER;
    const batch = new PadBatchifier({ padValue: -big }).batchify([
      NDList.of(int64([1, 1], [big], 'ids')),
      NDList.of(int64([1, 2], [-big, 3], 'ids')),
    ]);
    expect(Array.from(batch.input.get('ids').data as BigInt64Array)).toEqual([
      BigInt(big),
      BigInt(-big),
      BigInt(-big),
      3n,
    ]);
  });

  it('stores float16 and bfloat16 pad values as their bits', () => {
    const half = (values: number[]) =>
      NDList.of(
        new Tensor('float16', Uint16Array.from(values.map(toFloat16Bits)), [1, values.length], 'h'),
      );
    const batch = new PadBatchifier({ padValue: -1.5 }).batchify([half([0.25]), half([65504, -2])]);
    const bits = batch.input.get('h').data as Uint16Array;
    expect(Array.from(bits, fromFloat16Bits)).toEqual([0.25, -1.5, 65504, -2]);
    expect(bits[1]).toBe(0xbe00);

    const brain = (n: number) =>
      NDList.of(new Tensor('bfloat16', new Uint16Array(n).fill(0x3f80), [1, n], 'b'));
    const padded = new PadBatchifier({ padValue: 3 }).batchify([brain(1), brain(2)]).input.get('b');
    expect(Array.from(padded.data as Uint16Array)).toEqual([
      0x3f80,
      toBfloat16Bits(3),
      0x3f80,
      0x3f80,
    ]);
  });

  it('pads strings with empty strings and bool with the value given', () => {
    const words = (w: string[]) => NDList.of(new Tensor('string', w, [1, w.length], 'w'));
    expect(
      nested(new PadBatchifier().batchify([words(['a']), words(['b', 'c'])]).input.get('w')),
    ).toEqual([
      ['a', ''],
      ['b', 'c'],
    ]);
    const flags = (n: number) => NDList.of(new Tensor('bool', new Uint8Array(n), [1, n], 'f'));
    expect(
      nested(new PadBatchifier({ padValue: 1 }).batchify([flags(1), flags(2)]).input.get('f')),
    ).toEqual([
      [false, true],
      [false, false],
    ]);
  });

  it('refuses a pad value its dtype cannot hold', () => {
    const cases: [DType, number][] = [
      ['uint8', -1],
      ['int8', 200],
      ['int32', 1.5],
      ['bool', 2],
      ['uint64', -1],
      ['int64', 2 ** 60],
    ];
    for (const [dtype, padValue] of cases) {
      const list = (n: number) => NDList.of(Tensor.zeros(dtype, [1, n], 'x'));
      expect(
        () => new PadBatchifier({ padValue }).batchify([list(1), list(2)]),
        `${dtype} ${padValue}`,
      ).toThrow(expect.objectContaining({ code: KilnErrorCode.InvalidConfig }));
    }
  });

  it('refuses invalid options up front', () => {
    const invalid = expect.objectContaining({ code: KilnErrorCode.InvalidConfig });
    expect(() => new PadBatchifier({ axes: [0] })).toThrow(invalid);
    expect(() => new PadBatchifier({ padValue: Number.NaN })).toThrow(invalid);
    expect(() => new PadBatchifier({ padValue: { a: Number.NaN } })).toThrow(invalid);
    expect(() => new PadBatchifier({ lengthsAxis: 0 })).toThrow(invalid);
    expect(() => new PadBatchifier({ maxPaddedElements: 0 })).toThrow(invalid);
  });

  it('adds an int64 lengths input with each row’s true length, replacing one already there', () => {
    const batchifier = new PadBatchifier({ lengthsInput: 'lengths' });
    const withLengths = NDList.of(...sequence([1, 2, 3]).tensors, int64([1], [3], 'lengths'));
    const batch = batchifier.batchify([
      sequence([1]),
      withLengths,
      NDList.of(
        int64([2, 2], [1, 2, 3, 4], 'input_ids'),
        int64([2, 2], [1, 1, 1, 1], 'attention_mask'),
      ),
    ]);
    expect(batch.input.names).toEqual(['input_ids', 'attention_mask', 'lengths']);
    expect(batch.input.get('lengths').dtype).toBe('int64');
    expect(nested(batch.input.get('lengths'))).toEqual([1, 3, 2, 2]);
    expect(nested(batchifier.batchify([sequence([4, 5])]).input.get('lengths'))).toEqual([2]);
  });
});

describe('PadBatchifier canBatch', () => {
  const padder = new PadBatchifier();

  it('accepts inputs that differ only in padded axes', () => {
    expect(padder.canBatch([sequence([1]), sequence([1, 2, 3])])).toBe(true);
    expect(padder.canBatch([sequence([1])])).toBe(true);
  });

  it('refuses inputs that differ in count, names, dtypes or ranks, or are empty', () => {
    expect(padder.canBatch([])).toBe(false);
    expect(padder.canBatch([new NDList(), new NDList()])).toBe(false);
    expect(padder.canBatch([sequence([1]), NDList.of(sequence([1]).get(0))])).toBe(false);
    expect(
      padder.canBatch([NDList.of(f32([1, 2], [1, 2], 'a')), NDList.of(f32([1, 2], [1, 2], 'b'))]),
    ).toBe(false);
    expect(
      padder.canBatch([NDList.of(f32([1, 2], [1, 2])), NDList.of(int64([1, 2], [1, 2]))]),
    ).toBe(false);
    expect(
      padder.canBatch([NDList.of(f32([1, 2], [1, 2])), NDList.of(f32([1, 2, 1], [1, 2]))]),
    ).toBe(false);
    expect(padder.canBatch([NDList.of(f32([], [1])), NDList.of(f32([], [2]))])).toBe(false);
  });

  it('refuses differences in axes that are not padded', () => {
    const padRows = new PadBatchifier({ axes: [1] });
    const grid = (h: number, w: number) =>
      NDList.of(f32([1, h, w], new Array<number>(h * w).fill(0)));
    expect(padRows.canBatch([grid(2, 3), grid(4, 3)])).toBe(true);
    expect(padRows.canBatch([grid(2, 3), grid(2, 4)])).toBe(false);
    expect(() => padRows.batchify([grid(2, 3), grid(2, 4)])).toThrow(
      expect.objectContaining({ code: KilnErrorCode.ShapeMismatch }),
    );
  });

  it('refuses a batch that would pad past maxPaddedElements', () => {
    const small = new PadBatchifier({ maxPaddedElements: 100 });
    const row = (n: number) => NDList.of(f32([1, n], new Array<number>(n).fill(0)));
    expect(small.canBatch([row(50), row(50)])).toBe(true);
    expect(small.canBatch([row(50), row(51)])).toBe(false);
  });

  it('needs the lengths axis on the first tensor', () => {
    const lengths = new PadBatchifier({ lengthsInput: 'n', lengthsAxis: 2 });
    expect(lengths.canBatch([sequence([1]), sequence([1, 2])])).toBe(false);
  });
});

/** A position-wise stand-in for a sequence model: what padding must not change. */
function positionwise(input: NDList): NDList {
  const x = input.get('x');
  const [rows, length] = x.shape as [number, number];
  const hidden = new Float32Array(rows * length * 2);
  const pooled = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    for (let l = 0; l < length; l++) {
      const v = (x.data as Float32Array)[r * length + l]!;
      hidden[(r * length + l) * 2] = v;
      hidden[(r * length + l) * 2 + 1] = v * 10 + l;
      pooled[r]! += v;
    }
  }
  return NDList.of(
    new Tensor('float32', hidden, [rows, length, 2], 'hidden'),
    new Tensor('float32', pooled, [rows], 'pooled'),
  );
}

describe('PadBatchifier unbatchify', () => {
  it('gives each input what it would get alone', () => {
    const item = fc
      .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 9 }))
      .chain(([rows, length]) =>
        fc
          .array(fc.integer({ min: -50, max: 50 }), {
            minLength: rows * length,
            maxLength: rows * length,
          })
          .map((v) => NDList.of(f32([rows, length], v, 'x'))),
      );
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 6 }), (inputs) => {
        const batch = new PadBatchifier().batchify(inputs);
        const outputs = batch.unbatchify(positionwise(batch.input));
        expect(outputs.map((o) => o.tensors.map(nested))).toEqual(
          inputs.map((i) => positionwise(i).tensors.map(nested)),
        );
      }),
      { numRuns: 200 },
    );
  });

  it('cuts int64 and float16 outputs back exactly', () => {
    const batch = new PadBatchifier().batchify([sequence([1, 2]), sequence([3, 4, 5])]);
    const ids = batch.input.get('input_ids');
    const halves = new Tensor(
      'float16',
      Uint16Array.from([1, 2, 0, 3, 4, 5].map(toFloat16Bits)),
      [2, 3],
      'h',
    );
    const [a, b] = batch.unbatchify(NDList.of(ids, halves));
    expect(nested(a!.get(0))).toEqual([[1, 2]]);
    expect(nested(b!.get(0))).toEqual([[3, 4, 5]]);
    expect(a!.get(0).data).toBeInstanceOf(BigInt64Array);
    expect(Array.from(a!.get('h').data as Uint16Array, fromFloat16Bits)).toEqual([1, 2]);
    expect(Array.from(b!.get('h').data as Uint16Array, fromFloat16Bits)).toEqual([3, 4, 5]);
  });

  it('by default cuts only the output axis whose index was padded, even when sizes collide', () => {
    // Padded length 4 equals the hidden size 4: only axis 1 follows the sequence.
    const batch = new PadBatchifier().batchify([sequence([1, 2]), sequence([1, 2, 3, 4])]);
    const output = NDList.of(Tensor.zeros('float32', [2, 4, 4], 'hidden'));
    expect(batch.unbatchify(output).map((o) => o.get(0).shape)).toEqual([
      [1, 2, 4],
      [1, 4, 4],
    ]);
  });

  it('cuts the output axes listed in outputAxes, and none for an empty list', () => {
    const batchifier = new PadBatchifier({ outputAxes: { attention: [1, 2], raw: [] } });
    const batch = batchifier.batchify([sequence([1, 2]), sequence([1, 2, 3])]);
    const output = NDList.of(
      Tensor.zeros('float32', [2, 3, 3], 'attention'),
      Tensor.zeros('float32', [2, 3], 'raw'),
    );
    expect(batch.unbatchify(output).map((o) => o.tensors.map((t) => t.shape))).toEqual([
      [
        [1, 2, 2],
        [1, 3],
      ],
      [
        [1, 3, 3],
        [1, 3],
      ],
    ]);
  });

  it('fails with SHAPE_MISMATCH when the output rows do not match the batch', () => {
    const batch = new PadBatchifier().batchify([sequence([1]), sequence([1, 2])]);
    expect(() => batch.unbatchify(NDList.of(Tensor.zeros('float32', [3, 2])))).toThrow(
      expect.objectContaining({ code: KilnErrorCode.ShapeMismatch }),
    );
  });
});

describe('PadBatchifier in core’s Predictor', () => {
  class CountingContext implements ExecutionContext {
    readonly batches: number[][] = [];
    async forward(input: NDList): Promise<NDList> {
      this.batches.push([...input.get(0).shape]);
      return positionwise(input);
    }
    async close(): Promise<void> {}
  }

  function fakeModel(context: ExecutionContext): Model {
    return {
      name: 'positionwise',
      engine: 'Fake',
      device: CPU,
      modelDir: '.',
      inputs: [{ name: 'x', dtype: 'float32', shape: [-1, -1] }],
      outputs: [{ name: 'hidden', dtype: 'float32', shape: [-1, -1, 2] }],
      properties: servingPropertiesFrom({}),
      describe: () => ({}),
      newExecutionContext: async () => context,
      dispose: async () => {},
    };
  }

  /** Inputs are number arrays; a string input becomes a float64 tensor, which cannot join. */
  const translator: Translator<number[] | string, number[]> = {
    batchifier: new PadBatchifier(),
    processInput: (_ctx, input) =>
      typeof input === 'string'
        ? NDList.of(new Tensor('float64', Float64Array.from([Number(input)]), [1, 1], 'x'))
        : NDList.of(f32([1, input.length], input, 'x')),
    processOutput: (_ctx, output) => Array.from(output.get('hidden').data as Float32Array),
  };

  it('pads what fits one batch and splits off what does not, answering every input', async () => {
    const context = new CountingContext();
    const predictor = await Predictor.create(fakeModel(context), translator);
    const results = await predictor.batchPredictSettled([[1], [2, 3, 4], '5', [6, 7]]);
    expect(context.batches).toEqual([
      [3, 3],
      [1, 1],
    ]);
    expect(results).toEqual([
      { ok: true, value: [1, 10] },
      { ok: true, value: [2, 20, 3, 31, 4, 42] },
      { ok: true, value: [5, 50] },
      { ok: true, value: [6, 60, 7, 71] },
    ]);
  });
});
