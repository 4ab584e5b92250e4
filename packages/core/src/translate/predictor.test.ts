import { describe, expect, it } from 'vitest';
import { NDList } from '../tensor/ndlist.js';
import { Tensor } from '../tensor/tensor.js';
import { Predictor } from './predictor.js';
import { StackBatchifier } from './stack-batchifier.js';
import { doublingModel } from './test-support.js';
import type { Translator } from './translator.js';

/**
 * Numbers in, numbers out; a row of `width` copies of each number. `fail` names inputs whose
 * input or output stage throws; `async` makes every stage answer with a promise.
 */
function numbersTranslator(options: {
  async: boolean;
  failInput?: number;
  failOutput?: number;
  width?: (n: number) => number;
}): Translator<number, number> {
  const answer = <T>(make: () => T): T | Promise<T> =>
    options.async ? Promise.resolve().then(make) : make();
  return {
    batchifier: new StackBatchifier(),
    processInput: (_ctx, n) =>
      answer(() => {
        if (n === options.failInput) throw new Error('cannot read this input');
        const width = options.width?.(n) ?? 1;
        return NDList.of(new Tensor('float32', new Float32Array(width).fill(n), [1, width]));
      }),
    processOutput: (_ctx, output, n) =>
      answer(() => {
        if (n === options.failOutput) throw new Error('cannot write this output');
        return (output.get(0).data as Float32Array)[0]!;
      }),
  };
}

describe('Predictor', () => {
  for (const async of [false, true]) {
    it(`runs a batch as one forward and fails only the inputs that fail (${async ? 'async' : 'sync'} translator)`, async () => {
      const forwards: number[] = [];
      const translator = numbersTranslator({ async, failInput: 2, failOutput: 4 });
      const predictor = await Predictor.create(doublingModel(forwards), translator);
      const results = await predictor.batchPredictSettled([1, 2, 3, 4, 5]);
      expect(forwards).toEqual([4]);
      expect(results.map((r) => (r.ok ? r.value : r.error.code))).toEqual([
        2,
        'INTERNAL',
        6,
        'INTERNAL',
        10,
      ]);
      expect(results[1]).toMatchObject({
        error: { message: "the model's translator failed to process the input" },
      });
      expect(results[3]).toMatchObject({
        error: { message: "the model's translator failed to process the output" },
      });
      await predictor.close();
    });
  }

  it('runs inputs that cannot share a batch in as many forwards as they need, answers in order', async () => {
    const forwards: number[] = [];
    // Odd numbers are rows of 1, even numbers rows of 2: two shapes, two forwards.
    const translator = numbersTranslator({ async: false, width: (n) => 1 + (n % 2 === 0 ? 1 : 0) });
    const timings: number[] = [];
    const predictor = await Predictor.create(doublingModel(forwards), translator, {
      onTimings: (t) => timings.push(t.forwards),
    });
    const answers = await predictor.batchPredict([1, 2, 3, 4, 5]);
    expect(answers).toEqual([2, 4, 6, 8, 10]);
    expect(forwards).toEqual([3, 2]);
    expect(timings).toEqual([2]);
    await predictor.close();
  });
});
