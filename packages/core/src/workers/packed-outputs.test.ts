import { MessageChannel } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { KilnError } from '../errors.js';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import type { ServingOutput } from '../translate/serving-io.js';
import { packServingOutputs, unpackServingOutputs } from './packed-outputs.js';

const answer = (rows: number, base: number): ServingOutput => ({
  type: 'tensors',
  tensors: NDList.of(
    new Tensor(
      'float32',
      Float32Array.from({ length: rows * 3 }, (_, i) => base + i),
      [rows, 3],
      'y',
    ),
    new Tensor(
      'int64',
      BigInt64Array.from({ length: rows }, (_, i) => BigInt(base + i)),
      [rows],
      'k',
    ),
  ),
});

describe('packed outputs', () => {
  it("carries a batch's tensor answers column by column across threads, each answer as it was", async () => {
    const outputs = [answer(1, 0), answer(2, 10), answer(1, 20)];
    const packed = packServingOutputs(outputs)!;
    expect(packed.data).toHaveLength(2);
    const { port1, port2 } = new MessageChannel();
    const received = new Promise<typeof packed>((resolve) => port2.once('message', resolve));
    port1.postMessage(
      packed,
      packed.data.map((column) => column.buffer as ArrayBuffer),
    );
    const back = unpackServingOutputs(await received);
    port1.close();
    port2.close();
    expect(back).toHaveLength(3);
    back.forEach((output, i) => {
      const expected = (outputs[i] as { tensors: NDList }).tensors;
      const got = (output as { tensors: NDList }).tensors;
      expect(got.get('y').shape).toEqual(expected.get('y').shape);
      expect(Array.from(got.get('y').data as Float32Array)).toEqual(
        Array.from(expected.get('y').data as Float32Array),
      );
      expect(Array.from(got.get('k').data as BigInt64Array)).toEqual(
        Array.from(expected.get('k').data as BigInt64Array),
      );
    });
  });

  it('takes a batch output split into rows as it is, and copies rows that are not its whole buffer', () => {
    const batch = Float32Array.from({ length: 9 }, (_, i) => i);
    const rows = (data: Float32Array): ServingOutput[] =>
      [0, 1, 2].map((i) => ({
        type: 'tensors',
        tensors: NDList.of(new Tensor('float32', data.subarray(i * 3, i * 3 + 3), [1, 3], 'y')),
      }));
    const whole = packServingOutputs(rows(batch))!;
    expect(whole.data[0]!.buffer).toBe(batch.buffer);
    expect(Array.from(whole.data[0] as Float32Array)).toEqual(Array.from(batch));
    // Asked to copy (a buffer that would not move), or rows of a larger buffer: copied once.
    expect(packServingOutputs(rows(batch), { copy: true })!.data[0]!.buffer).not.toBe(batch.buffer);
    const larger = new Float32Array(12);
    expect(packServingOutputs(rows(larger))!.data[0]!.buffer).not.toBe(larger.buffer);
    // Out of order: copied in the answers' order.
    const swapped = rows(batch).reverse();
    const packed = packServingOutputs(swapped)!;
    expect(packed.data[0]!.buffer).not.toBe(batch.buffer);
    expect(Array.from(packed.data[0] as Float32Array)).toEqual([6, 7, 8, 3, 4, 5, 0, 1, 2]);
  });

  it('leaves answers of other kinds or layouts to go one by one', () => {
    const json: ServingOutput = { type: 'json', value: { a: 1 } };
    const withHeaders: ServingOutput = { ...answer(1, 0), headers: { 'x-a': 'b' } };
    const renamed: ServingOutput = {
      type: 'tensors',
      tensors: NDList.of(
        new Tensor('float32', new Float32Array(3), [1, 3], 'z'),
        (answer(1, 0) as { tensors: NDList }).tensors.get('k'),
      ),
    };
    const strings: ServingOutput = {
      type: 'tensors',
      tensors: NDList.of(new Tensor('string', ['a'], [1], 'y')),
    };
    expect(packServingOutputs([answer(1, 0), json])).toBeUndefined();
    expect(packServingOutputs([answer(1, 0), withHeaders])).toBeUndefined();
    expect(packServingOutputs([answer(1, 0), renamed])).toBeUndefined();
    expect(packServingOutputs([strings, strings])).toBeUndefined();
  });

  it('refuses packed answers whose shapes and data disagree', () => {
    const packed = packServingOutputs([answer(1, 0), answer(1, 5)])!;
    expect(() => unpackServingOutputs({ ...packed, answers: 3 })).toThrow(KilnError);
    expect(() => unpackServingOutputs({ ...packed, dims: [1, 30, 1, 1, 3, 1] })).toThrow(
      /outgrow its data/,
    );
    expect(() => unpackServingOutputs({ ...packed, dtypes: ['float32'] })).toThrow(/disagree/);
  });
});
