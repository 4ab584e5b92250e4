import { KilnError, KilnErrorCode, type NDList, type TensorDescriptor } from '@kiln/core';
import { describe, expect, it } from 'vitest';
import {
  type WarmupRequest,
  parseWarmupBatchSizes,
  parseWarmupShape,
  warmUp,
  warmupBatchSizes,
} from './warm-up.js';

const BATCHED: TensorDescriptor[] = [{ name: 'x', dtype: 'float32', shape: [-1, -1, 3] }];
const DEFAULTS: WarmupRequest = {
  batchSizes: undefined,
  shape: undefined,
  batchSize: 1,
  autoBatchSize: undefined,
};

/** Runs warmUp over a recording runner: the shapes of each batch's requests. */
async function record(
  inputs: readonly TensorDescriptor[],
  request: Partial<WarmupRequest>,
  fail?: string,
) {
  const batches: number[][][] = [];
  const report = await warmUp(
    inputs,
    async (batch: readonly NDList[]) => {
      batches.push(batch.map((request) => [...request.get(0).shape]));
      return batch.map(() =>
        fail
          ? { ok: false as const, error: new KilnError(KilnErrorCode.EngineError, fail) }
          : { ok: true as const, value: undefined },
      );
    },
    { ...DEFAULTS, ...request },
  );
  return { report, batches };
}

describe('warmupBatchSizes', () => {
  it('defaults to 1 and the batch size, the adaptive one for a model with a batch axis', () => {
    expect(warmupBatchSizes(BATCHED, DEFAULTS)).toEqual([1]);
    expect(warmupBatchSizes(BATCHED, { ...DEFAULTS, batchSize: 8 })).toEqual([1, 8]);
    expect(warmupBatchSizes(BATCHED, { ...DEFAULTS, autoBatchSize: 32 })).toEqual([1, 32]);
    const fixed = [{ name: 'x', dtype: 'float32', shape: [1, 3] }] as const;
    expect(warmupBatchSizes(fixed, { ...DEFAULTS, autoBatchSize: 32 })).toEqual([1]);
    expect(warmupBatchSizes(BATCHED, { ...DEFAULTS, batchSizes: [4, 2] })).toEqual([4, 2]);
  });
});

describe('warmUp', () => {
  it('runs one batch per size of zero requests, free dimensions at 1', async () => {
    const { report, batches } = await record(BATCHED, { batchSizes: [1, 3] });
    expect(report).toEqual({ batchSizes: [1, 3], ms: expect.any(Number) });
    expect(batches).toEqual([
      [[1, 1, 3]],
      [
        [1, 1, 3],
        [1, 1, 3],
        [1, 1, 3],
      ],
    ]);
  });

  it('shapes requests by warmup_shape', async () => {
    const { batches } = await record(BATCHED, { batchSizes: [2], shape: '1,128,3' });
    expect(batches).toEqual([
      [
        [1, 128, 3],
        [1, 128, 3],
      ],
    ]);
  });

  it('skips, with the reason, inputs it cannot make and a run that fails; none asked runs nothing', async () => {
    const text = [{ name: 'prompt', dtype: 'string', shape: [-1] }] as const;
    expect((await record(text, {})).report).toEqual({ skipped: 'input prompt is string' });
    const unshaped = [{ name: 'x', dtype: 'float32' }] as const;
    expect((await record(unshaped, {})).report).toEqual({
      skipped: 'input x declares no shape (set warmup_shape)',
    });
    expect((await record([], {})).report).toEqual({ skipped: 'the model declares no inputs' });
    expect((await record(BATCHED, {}, 'zeros refused')).report).toEqual({
      skipped: 'its run at batch size 1 failed: zeros refused',
    });
    const none = await record(BATCHED, { batchSizes: [] });
    expect(none).toEqual({ report: undefined, batches: [] });
  });
});

describe('parsing', () => {
  it("leaves out the default's larger size when one row says it would pass the budget", async () => {
    const slowRow = (msPerRow: number) => async (batch: readonly NDList[]) => {
      await new Promise((resolve) => setTimeout(resolve, msPerRow * batch.length));
      return batch.map(() => ({ ok: true as const, value: undefined }));
    };
    // 60 ms a row: 32 rows would take ~1.9 s (timed from batches of 1 and 2).
    const slow = await warmUp(BATCHED, slowRow(60), { ...DEFAULTS, autoBatchSize: 32 });
    expect(slow).toMatchObject({
      batchSizes: [1],
      leftOut: expect.stringMatching(/batch size 32 would take about \d+ ms .*warmup_batch_sizes/),
    });
    // Asked for by warmup_batch_sizes, the same size runs.
    const asked = await warmUp(BATCHED, slowRow(10), {
      ...DEFAULTS,
      batchSizes: [1, 32],
      autoBatchSize: 32,
    });
    expect(asked).toMatchObject({ batchSizes: [1, 32] });
    expect(asked).not.toHaveProperty('leftOut');
    // A cheap model runs both.
    const cheap = await warmUp(BATCHED, slowRow(0), { ...DEFAULTS, autoBatchSize: 32 });
    expect(cheap).toMatchObject({ batchSizes: [1, 32] });
  });

  it('reads batch sizes and none; refuses 0, negatives and words, naming the key', () => {
    expect(parseWarmupBatchSizes(' 1, 4,4 ')).toEqual([1, 4, 4]);
    expect(parseWarmupBatchSizes('None')).toEqual([]);
    for (const bad of ['0', '-1', 'a', '1,,2', ''])
      expect(() => parseWarmupBatchSizes(bad)).toThrow(/^warmup_batch_sizes=.*is not a batch size/);
  });

  it('reads shapes split by | and refuses empty or non-positive dimensions', () => {
    expect(parseWarmupShape('1,128|1, 128')).toEqual([
      [1, 128],
      [1, 128],
    ]);
    for (const bad of ['1,0', '', '1,x', '1,128|'])
      expect(() => parseWarmupShape(bad)).toThrow(/warmup_shape/);
  });
});
