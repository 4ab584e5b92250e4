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
  it("leaves out the default's larger size when it would pass the budget, timing rows only where the first run cannot tell", async () => {
    // A batch costs `fixedMs` plus `rowMs` a row on a clock of the test's own, the first run of
    // the session `coldMs` more; the sizes run are recorded.
    const timed = (fixedMs: number, rowMs: number, coldMs = 0) => {
      const sizes: number[] = [];
      let clock = 0;
      const runner = async (batch: readonly NDList[]) => {
        clock += fixedMs + rowMs * batch.length + (sizes.length === 0 ? coldMs : 0);
        sizes.push(batch.length);
        return batch.map(() => ({ ok: true as const, value: undefined }));
      };
      return { sizes, runner, now: () => clock };
    };
    const request = { ...DEFAULTS, autoBatchSize: 32 };
    const warm = (t: ReturnType<typeof timed>, r: WarmupRequest = request) =>
      warmUp(BATCHED, t.runner, r, t.now);
    // 60 ms a row: the first run alone says 32 rows would take far too long.
    const slow = timed(0, 60);
    expect(await warm(slow)).toMatchObject({
      batchSizes: [1],
      leftOut: expect.stringMatching(/batch size 32 would take about \d+ ms .*warmup_batch_sizes/),
    });
    expect(slow.sizes).toEqual([1]);
    // 10 ms a row: the first run cannot tell; rows timed at 1 and 2 say ~320 ms.
    const middling = timed(0, 10);
    expect(await warm(middling)).toMatchObject({ batchSizes: [1] });
    expect(middling.sizes).toEqual([1, 1, 2]);
    // 8 ms a batch whatever its rows: timed at 1 and 2, 32 rows cost about as little.
    const fixed = timed(8, 0);
    expect(await warm(fixed)).toMatchObject({ batchSizes: [1, 32] });
    expect(fixed.sizes).toEqual([1, 1, 2, 32]);
    // A cheap model runs both at once.
    const cheap = timed(0.1, 0.1);
    expect(await warm(cheap)).toMatchObject({ batchSizes: [1, 32] });
    expect(cheap.sizes).toEqual([1, 32]);
    // A cold first run (setting the shape up) that says nothing of a row's cost: timed warm.
    const cold = timed(0.1, 0.1, 20);
    expect(await warm(cold)).toMatchObject({ batchSizes: [1, 32] });
    expect(cold.sizes).toEqual([1, 1, 2, 32]);
    // Asked for by warmup_batch_sizes, a slow size runs all the same.
    const asked = timed(0, 10);
    const report = await warm(asked, { ...request, batchSizes: [1, 32] });
    expect(report).toMatchObject({ batchSizes: [1, 32] });
    expect(report).not.toHaveProperty('leftOut');
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
