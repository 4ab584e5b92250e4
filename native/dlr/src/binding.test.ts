import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type DlrGraph, writeDlrModelFolder } from '@kiln/testing';
import { conformanceBinding } from './binding-support.js';
import type { DlrInputTensor, DlrModelHandle } from './native-types.js';

// The addon against the conformance libdlr: metadata, runs, input checks, the one-call-per-
// handle rule, disposal and DLR's errors, without the engine layer.

const binding = await conformanceBinding();
const tmp = mkdtempSync(join(tmpdir(), 'kiln-dlr-binding-'));
let folders = 0;

const addMul: DlrGraph = {
  op: 'add_mul',
  inputs: [
    { name: 'a', dtype: 'float32', shape: [-1, 3] },
    { name: 'b', dtype: 'float32', shape: [-1, 3] },
  ],
  outputs: [
    { name: 'sum', dtype: 'float32', shape: [-1, 3] },
    { name: 'product', dtype: 'float32', shape: [-1, 3] },
  ],
};
const stats: DlrGraph = {
  op: 'stats',
  inputs: [],
  outputs: [{ name: 'counters', dtype: 'int64', shape: [6] }],
};

async function folder(graph: DlrGraph): Promise<string> {
  return writeDlrModelFolder(join(tmp, `m${++folders}`), graph);
}

function pair(rows: number, a: number[], b: number[]): DlrInputTensor[] {
  return [
    { name: 'a', type: 'float32', shape: [rows, 3], data: Float32Array.from(a) },
    { name: 'b', type: 'float32', shape: [rows, 3], data: Float32Array.from(b) },
  ];
}

async function rejection(
  promise: () => Promise<unknown>,
): Promise<{ code?: string; message: string }> {
  try {
    await promise();
  } catch (error) {
    return error as { code?: string; message: string };
  }
  throw new Error('expected a failure');
}

describe.skipIf(!binding)('the DLR addon over the conformance library', () => {
  const { library } = binding!;
  const open: DlrModelHandle[] = [];
  const create = async (graph: DlrGraph, numThreads?: number) => {
    const model = await library.createModel({ modelPath: await folder(graph), numThreads });
    open.push(model);
    return model;
  };
  afterAll(async () => {
    await Promise.allSettled(open.map((m) => m.dispose()));
    rmSync(tmp, { recursive: true, force: true });
  });

  it('opens the library and reports its version', () => {
    expect(library.version).toBe('1.10.0-kiln-conformance');
    expect(library.missingOptional).toEqual([]);
  });

  it('reads names, types and shapes of inputs and outputs', async () => {
    const model = await create(addMul);
    expect(model.inputs).toEqual([
      { name: 'a', type: 'float32', shape: [-1, 3] },
      { name: 'b', type: 'float32', shape: [-1, 3] },
    ]);
    expect(model.outputs.map((o) => [o.name, o.type, o.shape])).toEqual([
      ['sum', 'float32', [-1, 3]],
      ['product', 'float32', [-1, 3]],
    ]);
    expect(model.outputNamesKnown).toBe(true);
    expect(model.backend).toBe('kiln-conformance');
  });

  it('names outputs output_<i> when the model has no DLR metadata', async () => {
    const model = await create({ ...addMul, hasMetadata: false });
    expect(model.outputNamesKnown).toBe(false);
    expect(model.outputs.map((o) => o.name)).toEqual(['output_0', 'output_1']);
  });

  it('runs, returning fresh buffers with the shape DLR reports after the run', async () => {
    const model = await create(addMul);
    const [sum, product] = await model.run(pair(2, [1, 2, 3, 4, 5, 6], [10, 20, 30, 40, 50, 60]));
    expect(sum).toMatchObject({ name: 'sum', type: 'float32', shape: [2, 3] });
    expect(Array.from(new Float32Array(sum!.data))).toEqual([11, 22, 33, 44, 55, 66]);
    expect(Array.from(new Float32Array(product!.data))).toEqual([10, 40, 90, 160, 250, 360]);
    const [again] = await model.run(pair(1, [1, 1, 1], [1, 1, 1]));
    expect(again!.shape).toEqual([1, 3]);
    expect(sum!.data).not.toBe(again!.data);
  });

  it('reads views at an offset and over shared memory', async () => {
    const model = await create(addMul);
    const shared = new Float32Array(new SharedArrayBuffer(7 * 4));
    shared.set([9, 1, 2, 3, 4, 5, 6]);
    const a = shared.subarray(1, 4);
    const b = new Float32Array(new Float32Array([0, 10, 20, 30]).buffer, 4, 3);
    const [sum] = await model.run([
      { name: 'a', type: 'float32', shape: [1, 3], data: a },
      { name: 'b', type: 'float32', shape: [1, 3], data: b },
    ]);
    expect(Array.from(new Float32Array(sum!.data))).toEqual([11, 22, 33]);
  });

  it('copies inputs before run() returns, so callers may reuse their buffers', async () => {
    const model = await create(addMul);
    const inputs = pair(1, [1, 2, 3], [4, 5, 6]);
    const pending = model.run(inputs);
    (inputs[0]!.data as Float32Array).fill(100);
    const [sum] = await pending;
    expect(Array.from(new Float32Array(sum!.data))).toEqual([5, 7, 9]);
  });

  it.each([
    [
      'an unknown name',
      [{ name: 'c', type: 'float32', shape: [1, 3], data: new Float32Array(3) }],
      'INVALID_INPUT',
      "no input named 'c'",
    ],
    [
      'a repeated name',
      [
        ...pair(1, [1, 1, 1], [1, 1, 1]),
        { name: 'a', type: 'float32', shape: [1, 3], data: new Float32Array(3) },
      ],
      'INVALID_INPUT',
      'given twice',
    ],
    [
      'a missing input',
      pair(1, [1, 1, 1], [1, 1, 1]).slice(0, 1),
      'INVALID_INPUT',
      'missing input(s): b',
    ],
    [
      'another dtype',
      [
        { ...pair(1, [1, 1, 1], [1, 1, 1])[0]!, type: 'int32', data: new Int32Array(3) },
        pair(1, [1, 1, 1], [1, 1, 1])[1]!,
      ],
      'UNSUPPORTED_DTYPE',
      'is float32, got int32',
    ],
    [
      'another rank',
      [
        { name: 'a', type: 'float32', shape: [3], data: new Float32Array(3) },
        pair(1, [1, 1, 1], [1, 1, 1])[1]!,
      ],
      'SHAPE_MISMATCH',
      'needs shape [-1,3], got [3]',
    ],
    [
      'another fixed dimension',
      [
        { name: 'a', type: 'float32', shape: [1, 4], data: new Float32Array(4) },
        pair(1, [1, 1, 1], [1, 1, 1])[1]!,
      ],
      'SHAPE_MISMATCH',
      'needs shape [-1,3]',
    ],
    [
      'a short buffer',
      [
        { name: 'a', type: 'float32', shape: [2, 3], data: new Float32Array(3) },
        pair(2, [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1])[1]!,
      ],
      'INVALID_INPUT',
      'holds 12 bytes',
    ],
    [
      'a negative dimension',
      [
        { name: 'a', type: 'float32', shape: [-1, 3], data: new Float32Array(3) },
        pair(1, [1, 1, 1], [1, 1, 1])[1]!,
      ],
      'INVALID_INPUT',
      'negative dimension',
    ],
    [
      'data that is not a typed array',
      [
        { name: 'a', type: 'float32', shape: [1, 3], data: [1, 2, 3] as unknown as Float32Array },
        pair(1, [1, 1, 1], [1, 1, 1])[1]!,
      ],
      'INVALID_INPUT',
      'must be a typed array',
    ],
  ])('refuses %s before DLR sees it', async (_label, inputs, code, message) => {
    const model = await create(addMul);
    const error = await rejection(async () => model.run(inputs as DlrInputTensor[]));
    expect(error.code).toBe(code);
    expect(error.message).toContain(message);
    const [sum] = await model.run(pair(1, [1, 2, 3], [1, 1, 1]));
    expect(Array.from(new Float32Array(sum!.data))).toEqual([2, 3, 4]);
  });

  it('runs one call at a time per handle: a second run or a dispose meanwhile is PREDICTOR_BUSY', async () => {
    const model = await create({ ...addMul, runDelayMs: 100 });
    const first = model.run(pair(1, [1, 2, 3], [1, 2, 3]));
    expect(model.busy).toBe(true);
    await expect(
      rejection(async () => model.run(pair(1, [1, 1, 1], [1, 1, 1]))),
    ).resolves.toMatchObject({ code: 'PREDICTOR_BUSY' });
    await expect(rejection(() => model.dispose())).resolves.toMatchObject({
      code: 'PREDICTOR_BUSY',
    });
    await first;
    expect(model.busy).toBe(false);
    await model.run(pair(1, [1, 1, 1], [1, 1, 1]));
  });

  it('disposes idempotently and refuses runs afterwards with CLOSED', async () => {
    const before = await counters();
    const model = await library.createModel({ modelPath: await folder(addMul) });
    expect((await counters()).live).toBe(before.live + 1);
    await model.dispose();
    await model.dispose();
    expect(model.disposed).toBe(true);
    expect((await counters()).live).toBe(before.live);
    await expect(
      rejection(async () => model.run(pair(1, [1, 1, 1], [1, 1, 1]))),
    ).resolves.toMatchObject({ code: 'CLOSED' });
  });

  it('hands the thread count to DLR per handle', async () => {
    const model = await create(stats, 3);
    const [out] = await model.run([]);
    expect(Number(new BigInt64Array(out!.data)[4])).toBe(3);
  });

  it('checks create requests before any DLR call', async () => {
    const modelPath = await folder(addMul);
    await expect(
      rejection(() => library.createModel({ modelPath, deviceType: 0 })),
    ).resolves.toMatchObject({ code: 'INVALID_CONFIG' });
    await expect(
      rejection(() => library.createModel({ modelPath, numThreads: -1 })),
    ).resolves.toMatchObject({ code: 'INVALID_CONFIG' });
    await expect(rejection(() => library.createModel({ modelPath: '' }))).resolves.toMatchObject({
      code: 'INVALID_INPUT',
    });
  });

  it('reads DLR’s last error on the thread whose call failed', async () => {
    const error = await rejection(() => library.createModel({ modelPath: join(tmp, 'absent') }));
    expect(error.code).toBe('MODEL_LOAD_FAILED');
    expect(error.message).toMatch(
      /^DLR CreateDLRModel failed: CreateDLRModel: model path '.*absent' does not exist$/,
    );
  });

  it('tells the device a folder was compiled for, or why it cannot', async () => {
    await expect(library.deviceTypeOf(await folder({ ...addMul, deviceType: 2 }))).resolves.toEqual(
      { deviceType: 2, error: null },
    );
    const broken = await folder(addMul);
    writeFileSync(join(broken, 'model.json'), '{');
    const answer = await library.deviceTypeOf(broken);
    expect(answer.deviceType).toBe(-1);
    expect(answer.error).toContain('GetDLRDeviceType failed');
  });

  async function counters(): Promise<{ concurrentUses: number; live: number }> {
    const model = await library.createModel({ modelPath: await folder(stats) });
    const [out] = await model.run([]);
    await model.dispose();
    const values = new BigInt64Array(out!.data);
    // The stats handle itself is live while it runs.
    return { concurrentUses: Number(values[0]), live: Number(values[1]) - 1 };
  }
});
