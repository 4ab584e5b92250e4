import { describe, expect, it } from 'vitest';
import { type AnyTensor, Tensor } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { probeLibTorch } from './probe.js';
import { ptOps } from './pt-ops.js';

const availability = await checkEngine('PyTorch', probeLibTorch);

const values = (t: AnyTensor) => Array.from(t.data as ArrayLike<number>);

/** IEEE half-precision bits (normal numbers) as a number. */
const halfToNumber = (bits: number) =>
  2 ** (((bits >> 10) & 0x1f) - 15) * (1 + (bits & 0x3ff) / 1024);

describe.skipIf(!availability.run)('ptOps', () => {
  it('softmax along a dimension sums to one and keeps order', async () => {
    const x = new Tensor('float32', Float32Array.of(1, 2, 3, 0, 0, 0), [2, 3], 'logits');
    const y = await ptOps.softmax(x, 1);
    expect(y.name).toBe('logits');
    const [a, b, c, d] = values(y);
    const e = [Math.exp(1), Math.exp(2), Math.exp(3)];
    const sum = e[0]! + e[1]! + e[2]!;
    expect(a).toBeCloseTo(e[0]! / sum, 6);
    expect(b).toBeCloseTo(e[1]! / sum, 6);
    expect(c).toBeCloseTo(e[2]! / sum, 6);
    expect(d).toBeCloseTo(1 / 3, 6);
  });

  it('softmax works on float16 by computing in float32', async () => {
    // float16 bits of 0 and 1.
    const y = await ptOps.softmax(new Tensor('float16', Uint16Array.of(0x0000, 0x3c00), [2]), 0);
    expect(y.dtype).toBe('float16');
    const [a, b] = values(y).map(halfToNumber);
    expect(a).toBeCloseTo(1 / (1 + Math.E), 3);
    expect(b).toBeCloseTo(Math.E / (1 + Math.E), 3);
  });

  it('topK returns sorted values with int64 indices', async () => {
    const x = new Tensor('float32', Float32Array.of(0.1, 0.7, 0.05, 0.15), [1, 4]);
    const { values: v, indices } = await ptOps.topK(x, 2);
    expect(values(v).map((n) => Number(n.toFixed(4)))).toEqual([0.7, 0.15]);
    expect(indices.dtype).toBe('int64');
    expect(Array.from(indices.data as BigInt64Array)).toEqual([1n, 3n]);
    const smallest = await ptOps.topK(x, 1, { largest: false });
    expect(Array.from(smallest.indices.data as BigInt64Array)).toEqual([2n]);
  });

  it('argmax along the last dimension', async () => {
    const x = new Tensor('int32', Int32Array.of(3, 9, 2, 7, 1, 8), [2, 3]);
    const y = await ptOps.argmax(x);
    expect(Array.from(y.data as BigInt64Array)).toEqual([1n, 2n]);
    expect((await ptOps.argmax(x, 0, true)).shape).toEqual([1, 3]);
  });

  it('normalizes channels, turning raw pixels into float32', async () => {
    const pixels = new Tensor('uint8', Uint8Array.of(0, 255, 128, 128), [2, 1, 2]);
    const y = await ptOps.normalize(pixels, [0, 128], [255, 64]);
    expect(y.dtype).toBe('float32');
    expect(values(y)).toEqual([0, 1, 0, 0]);
  });

  it('resizes CHW float and HWC uint8 images', async () => {
    const x = new Tensor('float32', Float32Array.of(0, 1, 2, 3), [1, 2, 2]);
    expect(values(await ptOps.resize(x, 4, 4, { mode: 'nearest' }))).toEqual([
      0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3,
    ]);
    const hwc = new Tensor('uint8', Uint8Array.of(0, 100, 200, 255, 10, 20, 30, 40), [2, 2, 2]);
    const small = await ptOps.resize(hwc, 1, 1, { mode: 'area', layout: 'hwc' });
    expect(small.dtype).toBe('uint8');
    expect([...small.shape]).toEqual([1, 1, 2]);
    expect(values(small)).toEqual([60, 104]);
  });

  it('rejects arguments that do not fit with INVALID_INPUT', async () => {
    const x = new Tensor('float32', Float32Array.of(1, 2, 3), [3]);
    await expect(ptOps.softmax(x, 2)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(ptOps.topK(x, 4)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(ptOps.resize(x, 2, 2)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(
      ptOps.resize(new Tensor('float32', new Float32Array(4), [1, 2, 2]), 100_000, 2),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(
      ptOps.softmax(new Tensor('int32', Int32Array.of(1), [1]), 0),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });
});
